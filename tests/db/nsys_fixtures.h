// Writes one logical profile as the SQLite export of several nsys versions, so the importer is
// tested on every schema variant it claims to read: the same ranges and GPU operations must
// import to the same rows whichever tables, columns and eventType ids carry them.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mactune::db::testing {

// The variants found in real exports and nsys' exporter docs (docs/database.md).
enum class ExportSchema {
  nsys2020,    // 2020.x: no metadata table, no ENUM tables, no mangledName/graphNodeId/payloads
  real_2_9_1,  // every CREATE TABLE of tests/db/data/saxpy-...sqlite (nsys 2022.2,
               // EXPORT_META_DATA)
  v2_enums,    // the 2.x tables plus ENUM_* tables (nsys 2022.4-2023.1)
  v3_16,       // schema 3.x (nsys 2024.6): META_DATA_EXPORT, ENUMs, greenContextId, binaryData,
               // partial NvtxPushRange events
  remapped,    // v3_16 whose ENUM_NSYS_EVENT_TYPE gives NVTX other ids than the historical ones
  text_names,  // names inline as TEXT and no StringIds (defensive: the oldest layout)
};
const char* schema_name(ExportSchema s);
bool has_partial_ranges(ExportSchema s);  // writes NvtxPushRange (open at capture end)
bool has_enums(ExportSchema s);
inline void PrintTo(ExportSchema s, std::ostream* os) {
  *os << schema_name(s);
}

struct SynthRange {
  enum Kind { push_pop, start_end, mark, push_only, domain_create, category } kind = push_pop;
  std::int64_t start = 0;
  std::optional<std::int64_t> end{};
  std::string name{};
  std::int64_t pid = 0, tid = 0;
  std::int64_t domain = 0;  // 0: the default domain
  bool registered = false;  // name through textId (text NULL), as nvtxDomainRegisterString does
};

struct SynthOp {
  enum Kind { kernel, memcpy, memset } kind = kernel;
  std::int64_t start = 0, end = 0;
  std::string name{};  // kernel demangled name
  std::int64_t pid = 0;
  std::int64_t correlation = 0;
  std::optional<std::int64_t> launch{};  // start of the launching runtime call, on `tid`
  std::int64_t tid = 0;
  bool nested_entry_point = false;  // also record the call's versioned entry point inside it
  std::int64_t bytes = 0, copy_kind = 1, stream = 7;
};

struct SynthProfile {
  std::vector<SynthRange> ranges;
  std::vector<SynthOp> ops;
};

// (pid << 24) | tid, as nsys serializes thread ids (host bits 0).
constexpr std::int64_t global_tid(std::int64_t pid, std::int64_t tid) {
  return (pid << 24) | tid;
}

// The directory of the shipped test data (tests/db/data).
std::string test_data_dir();
std::string real_export_path();  // the pipit saxpy export

// Writes `p` to a new file at `path` in the tables of `schema`.
void write_export(const std::string& path, ExportSchema schema, const SynthProfile& p);

// A decode-loop-like profile: `steps` push/pop "step" ranges, each with `kernels_per_step`
// kernels launched inside phase ranges and one memcpy, on one thread of one process.
SynthProfile decode_profile(int steps, int kernels_per_step);

}  // namespace mactune::db::testing
