#include "tests/db/nsys_fixtures.h"

#include <map>
#include <memory>
#include <variant>

#include "db/sqlite.h"

namespace mactune::db::testing {
namespace {

// nsys 2020.1's exporter docs: every column INT NOT NULL where a value always exists.
constexpr const char* kNsys2020 = R"sql(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INT, utcTime TEXT, localTime TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL,
  eventClass INT NOT NULL, globalTid INT, correlationId INT, nameId INT NOT NULL,
  returnValue INT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL,
  deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT,
  globalPid INT, demangledName INT NOT NULL, shortName INT NOT NULL, launchType INT,
  cacheConfig INT, registersPerThread INT NOT NULL, gridX INT NOT NULL, gridY INT NOT NULL,
  gridZ INT NOT NULL, blockX INT NOT NULL, blockY INT NOT NULL, blockZ INT NOT NULL,
  staticSharedMemory INT NOT NULL, dynamicSharedMemory INT NOT NULL,
  localMemoryPerThread INT NOT NULL, localMemoryTotal INT NOT NULL, gridId INT NOT NULL,
  sharedMemoryExecuted INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT NOT NULL, end INT NOT NULL,
  deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT,
  globalPid INT, bytes INT NOT NULL, copyKind INT NOT NULL, deprecatedSrcId INT, srcKind INT,
  dstKind INT, srcDeviceId INT, srcContextId INT, dstDeviceId INT, dstContextId INT,
  migrationCause INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INT NOT NULL, end INT NOT NULL,
  deviceId INT NOT NULL, contextId INT NOT NULL, streamId INT NOT NULL, correlationId INT,
  globalPid INT, value INT NOT NULL, bytes INT NOT NULL, memKind INT);
CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT,
  category INT, color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT,
  domainId INT);
)sql";

// The tables of an nsys 2024.6.2 export (export schema 3.16.1) that the importer reads.
constexpr const char* kV3_16 = R"sql(
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
  busLocation TEXT, smCount INTEGER, chipName TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
  launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
  gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
  blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
  staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
  localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
  gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
  sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
  copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
  srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
  migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL,
  bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
  nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
  int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
  floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', '2024.6.2.225');
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.16.1');
INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H200', '0000:19:00.0', 132, 'GH100');
)sql";

constexpr const char* kTextNames = R"sql(
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER,
  streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName TEXT, shortName TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER,
  streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER, deviceId INTEGER,
  streamId INTEGER, correlationId INTEGER, globalPid INTEGER, bytes INTEGER, value INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, globalTid INTEGER,
  correlationId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, text TEXT,
  globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER);
)sql";

constexpr const char* kEnums = R"sql(
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (0, 'CUDA_MEMCPY_KIND_UNKNOWN', 'Unknown'),
  (1, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device'), (2, 'CUDA_MEMCPY_KIND_DTOH', 'Device-to-Host'),
  (8, 'CUDA_MEMCPY_KIND_DTOD', 'Device-to-Device');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
  (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device');
)sql";

struct TypeIds {
  std::int64_t push_pop, start_end, mark, push_only, domain_create, category;
};
constexpr TypeIds kHistorical{59, 60, 34, 35, 75, 33};
// Mark and start/end swapped, the rest moved: only the file's ENUM table can tell them.
constexpr TypeIds kRemapped{159, 34, 60, 135, 175, 133};

using Value = std::variant<std::monostate, std::int64_t, std::string>;

// Inserts rows by column name into whatever columns the variant's table has; NOT NULL
// columns not given get 0 (or ''), as nsys writes defaults.
class Writer {
 public:
  Writer(const std::string& path, bool string_ids)
      : c_(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE), string_ids_(string_ids) {}
  Connection& conn() { return c_; }

  void insert(const std::string& table, const std::vector<std::pair<std::string, Value>>& row) {
    auto& cols = columns(table);
    std::string key = table;
    std::vector<const Value*> values;
    for (const auto& col : cols) {
      const Value* v = nullptr;
      for (const auto& [name, value] : row)
        if (name == col.name) v = &value;
      values.push_back(v);
    }
    auto& st = statements_[table];
    if (!st) {
      std::string names, params;
      for (std::size_t i = 0; i < cols.size(); ++i) {
        names += (i ? ", " : "") + sql_ident(cols[i].name);
        params += (i ? ", ?" : "?") + std::to_string(i + 1);
      }
      st = std::make_unique<Statement>(
          c_.prepare("INSERT INTO " + table + " (" + names + ") VALUES (" + params + ")"));
    }
    st->reset();
    for (std::size_t i = 0; i < cols.size(); ++i) {
      const int p = static_cast<int>(i) + 1;
      const Value* v = values[i];
      if (v && std::holds_alternative<std::int64_t>(*v))
        st->bind(p, std::get<std::int64_t>(*v));
      else if (v && std::holds_alternative<std::string>(*v))
        st->bind(p, std::get<std::string>(*v));
      else if (cols[i].not_null && cols[i].text)
        st->bind(p, "");
      else if (cols[i].not_null)
        st->bind(p, std::int64_t{0});
      else
        st->bind_null(p);
    }
    st->run();
  }
  bool has(const std::string& table, const std::string& column) {
    for (const auto& c : columns(table))
      if (c.name == column) return true;
    return false;
  }
  // A name column's value: an id into StringIds, or the text where the variant has none.
  Value name(const std::string& s) {
    if (!string_ids_) return s;
    auto [it, fresh] = ids_.try_emplace(s, static_cast<std::int64_t>(ids_.size()) + 1);
    if (fresh) insert("StringIds", {{"id", it->second}, {"value", s}});
    return it->second;
  }

 private:
  struct Column {
    std::string name;
    bool not_null, text;
  };
  std::vector<Column>& columns(const std::string& table) {
    auto& cols = columns_[table];
    if (cols.empty()) {
      auto s = c_.prepare("SELECT name, \"notnull\", upper(type) FROM pragma_table_info(?1)");
      s.bind(1, table);
      while (s.step()) cols.push_back({s.text(0), s.int64(1) != 0, s.text(2) == "TEXT"});
    }
    return cols;
  }
  Connection c_;
  bool string_ids_;
  std::map<std::string, std::vector<Column>> columns_;
  std::map<std::string, std::unique_ptr<Statement>> statements_;
  std::map<std::string, std::int64_t> ids_;
};

void create_tables(Connection& c, ExportSchema schema) {
  switch (schema) {
    case ExportSchema::nsys2020:
      c.exec(kNsys2020);
      return;
    case ExportSchema::real_2_9_1:
    case ExportSchema::v2_enums: {
      const Connection real(file_uri(real_export_path(), "immutable=1"),
                            SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      auto s = real.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND sql NOT NULL");
      while (s.step()) c.exec(s.text(0));
      c.exec(
          "INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_PRODUCT_VERSION', '2022.2.1.31'),"
          " ('EXPORT_SCHEMA_VERSION', '2.9.1')");
      if (schema == ExportSchema::v2_enums) c.exec(kEnums);
      return;
    }
    case ExportSchema::v3_16:
    case ExportSchema::remapped:
      c.exec(kV3_16);
      c.exec(kEnums);
      return;
    case ExportSchema::text_names:
      c.exec(kTextNames);
      return;
  }
}

void write_enum_event_types(Writer& w, const TypeIds& t) {
  const std::pair<const char*, std::int64_t> rows[] = {{"NvtxCategory", t.category},
                                                       {"NvtxMark", t.mark},
                                                       {"NvtxPushRange", t.push_only},
                                                       {"NvtxPushPopRange", t.push_pop},
                                                       {"NvtxStartEndRange", t.start_end},
                                                       {"NvtxDomainCreate", t.domain_create},
                                                       {"CudaKernel", 79},
                                                       {"CudaMemcpy", 80}};
  for (const auto& [name, id] : rows)
    w.insert("ENUM_NSYS_EVENT_TYPE", {{"id", id}, {"name", std::string(name)}, {"label", name}});
}

std::string short_name_of(const std::string& demangled) {
  std::string s = demangled.substr(0, demangled.find_first_of("<("));
  if (const auto sp = s.rfind(' '); sp != std::string::npos) s = s.substr(sp + 1);
  if (const auto colon = s.rfind(':'); colon != std::string::npos) s = s.substr(colon + 1);
  return s;
}

}  // namespace

const char* schema_name(ExportSchema s) {
  switch (s) {
    case ExportSchema::nsys2020:
      return "nsys2020";
    case ExportSchema::real_2_9_1:
      return "real_2_9_1";
    case ExportSchema::v2_enums:
      return "v2_enums";
    case ExportSchema::v3_16:
      return "v3_16";
    case ExportSchema::remapped:
      return "remapped";
    case ExportSchema::text_names:
      return "text_names";
  }
  return "?";
}
bool has_partial_ranges(ExportSchema s) {
  return s == ExportSchema::v3_16 || s == ExportSchema::remapped;
}
bool has_enums(ExportSchema s) {
  return s == ExportSchema::v2_enums || has_partial_ranges(s);
}

std::string test_data_dir() {
  return MACTUNE_TEST_DATA_DIR;
}
std::string real_export_path() {
  return test_data_dir() + "/saxpy-mpi-cuda-perlmutter.sqlite";
}

void write_export(const std::string& path, ExportSchema schema, const SynthProfile& p) {
  Writer w(path, schema != ExportSchema::text_names);
  create_tables(w.conn(), schema);
  Transaction tx(w.conn());
  const TypeIds& ids = schema == ExportSchema::remapped ? kRemapped : kHistorical;
  if (has_enums(schema)) write_enum_event_types(w, ids);
  if (w.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"))
    w.insert("TARGET_INFO_SESSION_START_TIME", {{"utcEpochNs", std::int64_t{1764435187000000000}}});
  const bool text_ids = w.has("NVTX_EVENTS", "textId");
  for (const SynthRange& r : p.ranges) {
    if (r.kind == SynthRange::push_only && !has_partial_ranges(schema)) continue;
    const std::int64_t type = r.kind == SynthRange::push_pop        ? ids.push_pop
                              : r.kind == SynthRange::start_end     ? ids.start_end
                              : r.kind == SynthRange::mark          ? ids.mark
                              : r.kind == SynthRange::push_only     ? ids.push_only
                              : r.kind == SynthRange::domain_create ? ids.domain_create
                                                                    : ids.category;
    std::vector<std::pair<std::string, Value>> row = {
        {"start", r.start}, {"eventType", type}, {"globalTid", global_tid(r.pid, r.tid)}};
    if (r.end) row.push_back({"end", *r.end});
    if (r.domain != 0) row.push_back({"domainId", r.domain});
    if (r.kind == SynthRange::start_end) row.push_back({"endGlobalTid", global_tid(r.pid, r.tid)});
    if (r.registered && text_ids)
      row.push_back({"textId", w.name(r.name)});
    else
      row.push_back({"text", r.name});
    w.insert("NVTX_EVENTS", row);
  }
  std::int64_t grid_id = 0;
  for (const SynthOp& op : p.ops) {
    std::vector<std::pair<std::string, Value>> row = {
        {"start", op.start},           {"end", op.end},
        {"deviceId", std::int64_t{0}}, {"contextId", std::int64_t{1}},
        {"streamId", op.stream},       {"correlationId", op.correlation},
        {"globalPid", op.pid << 24}};
    std::string api;
    if (op.kind == SynthOp::kernel) {
      api = "cudaLaunchKernel";
      row.insert(row.end(), {{"demangledName", w.name(op.name)},
                             {"shortName", w.name(short_name_of(op.name))},
                             {"registersPerThread", std::int64_t{96}},
                             {"gridX", std::int64_t{132}},
                             {"gridY", std::int64_t{8}},
                             {"gridZ", std::int64_t{1}},
                             {"blockX", std::int64_t{128}},
                             {"blockY", std::int64_t{1}},
                             {"blockZ", std::int64_t{1}},
                             {"dynamicSharedMemory", std::int64_t{49152}},
                             {"gridId", ++grid_id}});
      w.insert("CUPTI_ACTIVITY_KIND_KERNEL", row);
    } else if (op.kind == SynthOp::memcpy) {
      api = "cudaMemcpyAsync";
      row.insert(row.end(), {{"bytes", op.bytes},
                             {"copyKind", op.copy_kind},
                             {"srcKind", std::int64_t{op.copy_kind == 1 ? 1 : 2}},
                             {"dstKind", std::int64_t{op.copy_kind == 1 ? 2 : 1}}});
      w.insert("CUPTI_ACTIVITY_KIND_MEMCPY", row);
    } else {
      api = "cudaMemsetAsync";
      row.insert(row.end(),
                 {{"bytes", op.bytes}, {"value", std::int64_t{0}}, {"memKind", std::int64_t{2}}});
      w.insert("CUPTI_ACTIVITY_KIND_MEMSET", row);
    }
    if (!op.launch) continue;
    const auto call = [&](std::int64_t start, std::int64_t end, const std::string& name) {
      w.insert("CUPTI_ACTIVITY_KIND_RUNTIME", {{"start", start},
                                               {"end", end},
                                               {"globalTid", global_tid(op.pid, op.tid)},
                                               {"correlationId", op.correlation},
                                               {"nameId", w.name(name)}});
    };
    // The inner call first: which row comes first must not decide the launch.
    if (op.nested_entry_point) call(*op.launch + 3, *op.launch + 25, api + "_v7000");
    call(*op.launch, *op.launch + 30, api);
  }
  tx.commit();
}

SynthProfile decode_profile(int steps, int kernels_per_step) {
  constexpr std::int64_t pid = 7000, tid = 7001, step_ns = 100000;
  const char* const names[] = {
      "void mactune::cuda::match_kernel<match_cuda_hd128_k512_bf16>(Params)",
      "void mactune::cuda::attend_kernel<attend_cuda_hd128_g4_t64_s2_bf16>(Params)",
      "void mactune::cuda::merge_kernel<merge_cuda_hd128_bf16>(Params)"};
  const char* const phases[] = {"match", "attend", "merge"};
  SynthProfile p;
  p.ranges.push_back({SynthRange::domain_create, 0, {}, "mactune", pid, tid, 1});
  std::int64_t corr = 1;
  for (int s = 0; s < steps; ++s) {
    const std::int64_t t0 = s * step_ns;
    p.ranges.push_back({SynthRange::push_pop, t0, t0 + step_ns - 1000, "step", pid, tid, 1, true});
    const std::int64_t phase_ns = (step_ns - 4000) / 3;
    for (int ph = 0; ph < 3; ++ph)
      p.ranges.push_back({SynthRange::push_pop, t0 + 1000 + ph * phase_ns,
                          t0 + 1000 + (ph + 1) * phase_ns - 10, std::string(phases[ph]), pid, tid,
                          1, true});
    p.ops.push_back(
        {SynthOp::memcpy, t0 + 700, t0 + 900, "", pid, corr++, t0 + 500, tid, false, 1 << 20});
    for (int k = 0; k < kernels_per_step; ++k) {
      const std::int64_t launch = t0 + 1000 + 10 + k * ((step_ns - 4000) / kernels_per_step);
      const int phase = k * 3 / kernels_per_step;
      p.ops.push_back({SynthOp::kernel, launch + 200, launch + 500, names[phase], pid, corr++,
                       launch, tid, k % 2 == 0});
    }
  }
  return p;
}

}  // namespace mactune::db::testing
