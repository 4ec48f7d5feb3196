#include "db/nsys_export.h"

#include <filesystem>

namespace mactune::db::nsys {
namespace {

namespace fs = std::filesystem;

// The eventType ids of NVTX events as every nsys since the first SQLite exporter writes them
// (documented in the exporter's "SQLite Schema Event Values"; 35-38 and 70/71 appear in
// later versions' ENUM_NSYS_EVENT_TYPE). Used when the file has no ENUM table, and for ids
// its ENUM table does not list.
struct KnownType {
  const char* name;
  std::int64_t historical_id;
  NvtxKind kind;
};
constexpr KnownType kNvtxTypes[] = {
    {"NvtxCategory", 33, NvtxKind::other},
    {"NvtxMark", 34, NvtxKind::mark},
    {"NvtxPushRange", 35, NvtxKind::push_only},
    {"NvtxPopRange", 36, NvtxKind::end_only},
    {"NvtxStartRange", 37, NvtxKind::start_only},
    {"NvtxEndRange", 38, NvtxKind::end_only},
    {"NvtxThread", 39, NvtxKind::other},
    {"NvtxPushPopRange", 59, NvtxKind::push_pop},
    {"NvtxStartEndRange", 60, NvtxKind::start_end},
    {"NvtxtPushPopRange", 70, NvtxKind::push_pop},
    {"NvtxtStartEndRange", 71, NvtxKind::start_end},
    {"NvtxDomainCreate", 75, NvtxKind::domain_create},
    {"NvtxDomainDestroy", 76, NvtxKind::other},
};

// CUDA_MEMCPY_KIND and CUDA_MEMOPR_MEMORY_KIND labels (the CUPTI enums nsys stores).
const char* const kMemcpyKinds[] = {"Unknown",
                                    "Host-to-Device",
                                    "Device-to-Host",
                                    "Host-to-Array",
                                    "Array-to-Host",
                                    "Array-to-Array",
                                    "Array-to-Device",
                                    "Device-to-Array",
                                    "Device-to-Device",
                                    "Host-to-Host",
                                    "Peer-to-Peer",
                                    "Unified Host-to-Device",
                                    "Unified Device-to-Host",
                                    "Unified Device-to-Device"};
const char* const kMemoryKinds[] = {"Pageable", "Pinned",        "Device",         "Array",
                                    "Managed",  "Device Static", "Managed Static", "Unknown"};

std::string label_of(const std::map<std::int64_t, std::string>& from_file,
                     const char* const* historical, std::size_t n, std::optional<std::int64_t> id) {
  if (!id) return "";
  if (const auto it = from_file.find(*id); it != from_file.end()) return it->second;
  if (*id >= 0 && static_cast<std::size_t>(*id) < n) return historical[*id];
  return "kind " + std::to_string(*id);
}

}  // namespace

Export::Export(const std::string& path) : path_(path) {
  std::error_code ec;
  MACTUNE_REQUIRE(fs::is_regular_file(path, ec), "nsys report '", path,
                  "' does not exist or is not a file");
  const std::string abs = fs::absolute(path).string();
  // Immutable: nothing is created beside the file, not even for a WAL-mode database that is
  // not an nsys export (a mactune database given by mistake would get a -wal and -shm from a
  // plain read-only open). nsys writes each export once, as a rollback-journal file, which
  // immutable mode reads as it is, in a read-only folder too.
  try {
    c_ = Connection(file_uri(abs, "immutable=1"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    load_schema();
  } catch (const SqliteError& e) {
    if (e.primary_code() == SQLITE_NOTADB || e.primary_code() == SQLITE_CORRUPT)
      input_error("'", path, "' is not an SQLite file (", sqlite3_errstr(e.primary_code()),
                  "); export the report with `nsys export --type sqlite`");
    throw;
  }
  MACTUNE_REQUIRE(has("CUPTI_ACTIVITY_KIND_KERNEL") || has("NVTX_EVENTS") || has("StringIds"), "'",
                  path,
                  "' is not an nsys SQLite export (no CUPTI_ACTIVITY_KIND_KERNEL, NVTX_EVENTS or "
                  "StringIds table)");
  load_metadata();
  load_enums();
}

bool Export::has(const std::string& table, const std::string& column) const {
  const auto it = columns_.find(table);
  return it != columns_.end() && it->second.count(column) != 0;
}

void Export::require(const std::string& table, const std::string& column) const {
  MACTUNE_REQUIRE(has(table, column), "nsys report '", path_, "': table ", table,
                  " has no column '", column, "' (", describe(), ")");
}

void Export::require_integers(const std::string& table, const std::string& column,
                              bool nullable) const {
  if (!has(table, column)) return;
  auto s = c_.prepare("SELECT rowid, typeof(" + sql_ident(column) + "), CAST(" + sql_ident(column) +
                      " AS TEXT) FROM " + sql_ident(table) + " WHERE typeof(" + sql_ident(column) +
                      ") NOT IN ('integer'" + (nullable ? ", 'null'" : "") + ") LIMIT 1");
  if (s.step()) {
    std::string value = s.text(2);
    if (value.size() > 40) value = value.substr(0, 40) + "...";
    input_error("nsys report '", path_, "': table ", table, " row ", s.int64(0), ": ", column,
                " holds ", s.text(1) == "null" ? "no value" : s.text(1) + " '" + value + "'",
                " where an integer belongs (", describe(), ")");
  }
}

std::string Export::col(const std::string& table, const std::string& alias,
                        const std::string& column) const {
  return has(table, column) ? alias + "." + sql_ident(column) : "NULL";
}

std::string Export::name_expr(const std::string& table, const std::string& alias,
                              const std::string& column, std::string& joins) const {
  if (!has(table, column)) return "NULL";
  const std::string ref = alias + "." + sql_ident(column);
  if (!has("StringIds")) {
    // Ids with nothing to resolve them are refused; text (the oldest layout) or only NULLs
    // are read as they are.
    const bool ids = c_.scalar_int("SELECT EXISTS (SELECT 1 FROM " + sql_ident(table) +
                                   " WHERE typeof(" + sql_ident(column) + ") = 'integer')") != 0;
    MACTUNE_REQUIRE(!ids, "nsys report '", path_, "': ", table, ".", column,
                    " holds ids into StringIds, but the file has no StringIds table (", describe(),
                    ")");
    return "CAST(" + ref + " AS TEXT)";
  }
  require("StringIds", "id");
  require("StringIds", "value");
  // An id StringIds does not hold would become its own number as a name.
  {
    auto q = c_.prepare("SELECT t.rowid, t." + sql_ident(column) + " FROM " + sql_ident(table) +
                        " t WHERE typeof(t." + sql_ident(column) +
                        ") = 'integer' AND NOT EXISTS (SELECT 1 FROM StringIds i WHERE i.id = t." +
                        sql_ident(column) + ") LIMIT 1");
    if (q.step())
      input_error("nsys report '", path_, "': table ", table, " row ", q.int64(0), ": ", column,
                  " = ", q.int64(1), " is not an id in StringIds (", describe(), ")");
  }
  const std::string s = "s_" + alias + "_" + column;
  joins += " LEFT JOIN StringIds " + s + " ON " + s + ".id = " + ref + " AND typeof(" + ref +
           ") = 'integer'";
  return "COALESCE(" + s + ".value, CAST(" + ref + " AS TEXT))";
}

std::string Export::describe() const {
  if (schema_version_.empty() && nsys_version_.empty())
    return "no export metadata: an nsys export from before 2021";
  std::string out = "export schema " + (schema_version_.empty() ? "?" : schema_version_);
  if (!nsys_version_.empty()) out += ", nsys " + nsys_version_;
  return out;
}

std::optional<std::int64_t> Export::session_start_utc_ns() const {
  if (!has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs")) return std::nullopt;
  auto s = c_.prepare("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1");
  return s.step() ? s.opt_int64(0) : std::nullopt;
}

std::string Export::gpus() const {
  if (!has("TARGET_INFO_GPU", "name")) return "";
  auto s = c_.prepare("SELECT " + col("TARGET_INFO_GPU", "g", "id") +
                      ", g.name FROM TARGET_INFO_GPU g ORDER BY 1");
  std::string out;
  while (s.step())
    out += (out.empty() ? "" : "; ") + (s.is_null(0) ? std::string("?") : s.text(0)) + ": " +
           s.text(1);
  return out;
}

NvtxKind Export::nvtx_kind(std::int64_t event_type) const {
  const auto it = nvtx_kinds_.find(event_type);
  return it == nvtx_kinds_.end() ? NvtxKind::unknown : it->second;
}

std::string Export::memcpy_kind(std::optional<std::int64_t> id) const {
  return label_of(memcpy_kinds_, kMemcpyKinds, std::size(kMemcpyKinds), id);
}

std::string Export::memory_kind(std::optional<std::int64_t> id) const {
  return label_of(memory_kinds_, kMemoryKinds, std::size(kMemoryKinds), id);
}

void Export::load_schema() {
  auto t = c_.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')");
  while (t.step()) columns_[t.text(0)];
  for (auto& [table, cols] : columns_) {
    auto s = c_.prepare("SELECT name, upper(type) FROM pragma_table_info(?1)");
    s.bind(1, table);
    while (s.step()) cols[s.text(0)] = s.text(1);
  }
}

void Export::load_metadata() {
  // Renamed from EXPORT_META_DATA to META_DATA_EXPORT with export schema 3 (nsys 2023).
  for (const char* table : {"META_DATA_EXPORT", "EXPORT_META_DATA"}) {
    if (!has(table, "name") || !has(table, "value")) continue;
    auto s = c_.prepare(std::string("SELECT name, value FROM ") + table +
                        " WHERE name IN ('EXPORT_SCHEMA_VERSION', 'EXPORT_PRODUCT_VERSION')");
    while (s.step())
      (s.text(0) == "EXPORT_SCHEMA_VERSION" ? schema_version_ : nsys_version_) = s.text(1);
    break;
  }
}

std::map<std::int64_t, std::string> Export::read_enum(const std::string& table,
                                                      const std::string& column) const {
  std::map<std::int64_t, std::string> out;
  if (!has(table, "id") || !has(table, column)) return out;
  auto s = c_.prepare("SELECT id, " + sql_ident(column) + " FROM " + sql_ident(table) +
                      " WHERE id IS NOT NULL AND " + sql_ident(column) + " IS NOT NULL");
  while (s.step()) out[s.int64(0)] = s.text(1);
  return out;
}

void Export::load_enums() {
  // The file's ENUM_NSYS_EVENT_TYPE is authoritative for every id it lists; an id it does
  // not list keeps its historical meaning unless the file gives that name another id.
  const auto from_file = read_enum("ENUM_NSYS_EVENT_TYPE", "name");
  std::set<std::string> named;
  for (const auto& [id, name] : from_file) {
    named.insert(name);
    NvtxKind kind = NvtxKind::other;  // a non-NVTX event type: never an NVTX row
    for (const KnownType& k : kNvtxTypes)
      if (name == k.name) kind = k.kind;
    nvtx_kinds_[id] = kind;
  }
  for (const KnownType& k : kNvtxTypes)
    if (!named.count(k.name) && !from_file.count(k.historical_id))
      nvtx_kinds_[k.historical_id] = k.kind;
  nvtx_ids_source_ = from_file.empty() ? "historical ids" : "ENUM_NSYS_EVENT_TYPE";

  memcpy_kinds_ = read_enum("ENUM_CUDA_MEMCPY_OPER", "label");
  memory_kinds_ = read_enum("ENUM_CUDA_MEM_KIND", "label");
}

}  // namespace mactune::db::nsys
