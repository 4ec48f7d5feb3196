// Selection at run time: one pure function, table -> built-in fallback, that always answers.
//
//   auto d = mactune::dispatch::Dispatcher::load("dispatch/h200.json");   // refused -> fallback
//   mactune::dispatch::Choice c = d.select(problem, /*context=*/65536, /*expected_hit_rate=*/0.8);
//   if (c.use_mac()) launch(c.mac->instance, c.mac->ring_capacity, c.mac->band, c.mac->params);
//   else launch(c.full.instance, c.full.params);
//   // or, with mactune's engines: session_options(c, d.catalog(), base) (dispatcher/session.h)
//
// A table is accepted whole or not at all: a table made on another device (fingerprint), for
// another schema version, with overlapping buckets, or naming an instance this build lacks is
// refused with one warning line, and every select() then uses the fallback. The fallback is
// documented in docs/dispatch-table.md: full attention with the catalog's first full instance
// that fits the shape; it never picks MAC, because without a measurement nothing says MAC pays
// off on this device. There are no tuning constants here: they live in the tables.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dispatcher/catalog.h"
#include "dispatcher/table.h"
#include "kernels/device.h"
#include "kernels/problem.h"

namespace mactune::dispatch {

enum class ChoiceSource : std::uint8_t { table, fallback };

struct Choice {
  ChoiceSource source = ChoiceSource::fallback;
  int entry = -1;                // index of the table entry that answered (source == table)
  FullChoice full;               // always set: the full-attention kernel (also MAC's warm-up steps)
  std::optional<MacChoice> mac;  // set when MAC-Attention is the choice
  std::optional<double> min_hit_rate;  // the bucket's break-even, when the table has one

  bool use_mac() const { return mac.has_value(); }
  // The kernel to launch: the MAC instance when MAC is chosen, else the full instance. Empty
  // only when the catalog holds no full-attention instance that fits the shape.
  const std::string& instance() const { return mac ? mac->instance : full.instance; }
};

// One line: "mac mac_cpu_avx2_hd128_bf16 K=512 r=256 (table entry 3, break-even 0.62)".
std::string describe(const Choice& c);

struct LoadOptions {
  // The device the table must have been tuned on; its backend is also the fallback's.
  DeviceFingerprint device = cpu_fingerprint();
  // false: accept a table made on another device (tools that read other machines' tables).
  bool check_device = true;
  const Catalog* catalog = nullptr;  // nullptr: default_catalog()
  // Receives the one warning line of a refused table; unset: "mactune: warning: ..." on stderr.
  std::function<void(std::string_view)> warn;
};

// "" when `table` may be used on `device` with `catalog`: check_structure(), then the device
// fingerprint (when check_device), then every instance is in the catalog, on the table's backend,
// of the right family (full: "full"; mac: not "full") and fits the entry's shape.
std::string validate_table(const DispatchTable& table, const LoadOptions& options);

// The selection itself, pure: the table entry of this shape whose batch and context intervals
// hold the problem (MAC when expected_hit_rate >= its min_hit_rate), else the fallback for
// `backend` from `catalog`. `context` is the KV length per request (for a mixed batch, the mean).
Choice select(const DispatchTable* table, const Catalog& catalog, Backend backend,
              const Problem& problem, std::int64_t context, double expected_hit_rate);

// The fallback alone (see the header comment).
Choice fallback_choice(const Catalog& catalog, Backend backend, const Problem& problem);

class Dispatcher {
 public:
  // No table: every select() answers with the fallback.
  explicit Dispatcher(LoadOptions options = {});

  // Reads, parses and validates; an unreadable, malformed or invalid table is refused with one
  // warning line and the Dispatcher falls back. Never throws for a bad table.
  static Dispatcher load(const std::filesystem::path& path, LoadOptions options = {});
  static Dispatcher from_text(std::string_view json_text, std::string_view origin,
                              LoadOptions options = {});
  // A table already in memory (e.g. from a generated header, via from_static()).
  static Dispatcher from_table(DispatchTable table, std::string_view origin,
                               LoadOptions options = {});

  Choice select(const Problem& problem, std::int64_t context, double expected_hit_rate) const;

  const DispatchTable* table() const { return table_ ? &*table_ : nullptr; }
  const std::string& refusal() const { return refusal_; }  // "" unless a table was refused
  const Catalog& catalog() const;
  Backend backend() const { return options_.device.backend; }

 private:
  void adopt(DispatchTable table, std::string_view origin);
  void refuse(std::string_view origin, const std::string& why);

  LoadOptions options_;
  std::optional<DispatchTable> table_;
  std::map<ShapeKey, std::vector<int>> by_shape_;  // entry indices per shape
  std::string refusal_;
};

}  // namespace mactune::dispatch
