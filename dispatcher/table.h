// Dispatch tables: which kernel to launch for a shape on one device, and when MAC-Attention
// pays off. The format is documented in docs/dispatch-table.md ("mactune.dispatch/1"). The
// tuner builds a DispatchTable in memory from its database and writes it with write_table()
// (JSON) and write_header() (a C++ header with the same table, for static linking); a serving
// engine loads it through a Dispatcher (dispatcher/dispatch.h), which validates it against the
// running device and the compiled instances and answers select(problem, context, hit rate).
#pragma once

#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/backend.h"
#include "kernels/dtype.h"
#include "kernels/fields.h"
#include "kernels/problem.h"

namespace mactune::dispatch {

inline constexpr std::string_view kDispatchSchema = "mactune.dispatch/1";
// The largest table file read (a table of every bucket of a large sweep is a few MiB).
inline constexpr std::uint64_t max_table_bytes = 256ull << 20;

// Launch parameters that are not part of an instance name (CPU chunk tokens, threads, ...) and
// the MAC settings besides K, r and tau: a flat map of typed scalars (kernels/fields.h), named
// as the field tables name them, written as a JSON object.
using ParamValue = Scalar;
using Params = mactune::Params;

// Closed interval [lo, hi] of positive integers; no hi: unbounded above.
struct Interval {
  std::int64_t lo = 1;
  std::optional<std::int64_t> hi;

  bool contains(std::int64_t x) const { return x >= lo && (!hi || x <= *hi); }
  bool overlaps(const Interval& o) const { return (!hi || o.lo <= *hi) && (!o.hi || lo <= *o.hi); }
  bool operator==(const Interval&) const = default;
};

// The shape an entry covers: every field of Problem except the batch (an interval of its own).
using ShapeKey = mactune::ShapeKey;

// Full attention: the baseline kernel, and what MAC's warm-up steps (m < min_context) run.
struct FullChoice {
  std::string instance;  // canonical instance name, e.g. "full_cpu_avx2_hd128_bf16"
  Params params;
  bool operator==(const FullChoice&) const = default;
};

// MAC-Attention: the instance and the ring settings it was measured with.
struct MacChoice {
  std::string instance;       // e.g. "mac_cpu_avx2_hd128_bf16", "attend_cuda_hd128_g4_t64_s2_bf16"
  int ring_capacity = 0;      // K
  int band = 0;               // r
  std::optional<double> tau;  // the match threshold measured with; none: the caller's own
  Params params;              // launch parameters and every other MAC setting
  bool operator==(const MacChoice&) const = default;
};

// The choice of a MAC configuration as a table carries it: K and r under their own keys, tau
// under its own when `with_tau`, every other field of the MAC settings' table in params beside
// the launch parameters.
MacChoice mac_choice(std::string instance, const MacParams& settings, Params launch, bool with_tau);
// The other way: the MAC settings a choice names, over `base` (the caller's tau when the
// choice has none). The params that are not MAC settings are left for the engine's table.
MacParams mac_settings(const MacChoice& choice, MacParams base);

// One bucket: a shape, a batch interval and a context interval (KV tokens per request).
struct Entry {
  ShapeKey shape;
  Interval batch;
  Interval context;
  FullChoice full;
  std::optional<MacChoice> mac;  // none: no MAC configuration was measured for this bucket
  // Break-even per-head hit rate: MAC is chosen at expected hit rates >= this. None: MAC never
  // won in this bucket (or was not measured).
  std::optional<double> min_hit_rate;
  std::string note;  // free text from the tuner (e.g. "ambiguous at 0.5"); ignored by select
  bool operator==(const Entry&) const = default;
};

struct TableDevice {
  Backend backend = Backend::cpu;
  std::string name;         // CPU model or GPU name
  std::string fingerprint;  // DeviceFingerprint::digest() of the device it was tuned on
  bool operator==(const TableDevice&) const = default;
};

struct Generated {
  std::string version;          // mactune version that produced it
  std::string git_revision;     // of that build
  std::string source_database;  // the database the measurements came from
  std::string time;             // ISO 8601, UTC
  bool operator==(const Generated&) const = default;
};

struct DispatchTable {
  std::string schema{kDispatchSchema};
  TableDevice device;
  Generated generated;
  std::vector<Entry> entries;
  bool operator==(const DispatchTable&) const = default;
};

// ---- Structure: what a table must satisfy on its own, whatever device reads it.

// "" when the table is well formed: the schema this build reads, a known backend, valid shapes,
// intervals with 1 <= lo <= hi, no two entries of one shape whose batch x context rectangles
// overlap, hit rates in [0, 1], MAC settings K >= 1 and r >= 1, no break-even without a MAC
// choice. Otherwise one sentence naming the first offending entry and field.
std::string check_structure(const DispatchTable& table);

// ---- JSON (dispatcher/json.cpp).

// The table as JSON text (2-space indent, keys in documented order).
std::string to_json(const DispatchTable& table);
// Parses JSON text; throws InputError naming `origin`, the JSON path and what is wrong, on
// malformed JSON, a wrong type, a missing or unknown key, or a structure error (above).
DispatchTable parse_table(std::string_view json_text, std::string_view origin);
// Reads and parses a file (InputError when it cannot be read or parsed).
DispatchTable read_table(const std::filesystem::path& path);
// Writes the table as JSON, atomically (a temporary file renamed over `path`), after
// check_structure(); throws InputError when the table is malformed or the file cannot be written.
void write_table(const DispatchTable& table, const std::filesystem::path& path);

// ---- C++ header form (dispatcher/header.cpp).

// A header that defines the same table as constexpr data and a function
// `mactune::dispatch::DispatchTable <ns>::<function>()` returning it; include it together with
// dispatcher/dispatch.h and pass the table to Dispatcher::from_table().
std::string to_header(const DispatchTable& table, std::string_view ns = "mactune_dispatch",
                      std::string_view function = "table");
void write_header(const DispatchTable& table, const std::filesystem::path& path,
                  std::string_view ns = "mactune_dispatch", std::string_view function = "table");

namespace detail {
// Writes `text` beside `path` and renames it over `path`: a reader never sees half a file.
// Throws InputError naming `what` and the path when it cannot.
void write_atomically(const std::filesystem::path& path, std::string_view text,
                      std::string_view what);
}  // namespace detail

// The current time as ISO 8601 UTC ("2026-03-01T12:00:00Z"), for Generated::time.
std::string utc_now_iso8601();

}  // namespace mactune::dispatch
