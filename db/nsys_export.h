// An `nsys export --type sqlite` file, opened read-only, with what it holds learned from the
// file itself: nsys creates tables lazily (a report without NVTX has no NVTX_EVENTS), adds and
// drops columns between versions, renamed its metadata table (EXPORT_META_DATA before schema 3,
// META_DATA_EXPORT since) and only lately ships its enums as ENUM_* tables. So nothing is
// assumed: tables from sqlite_master, columns from PRAGMA table_info, NVTX event types from
// ENUM_NSYS_EVENT_TYPE where the file has it and from the ids nsys has always used where not.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "db/sqlite.h"

namespace mactune::db::nsys {

// What an NVTX_EVENTS row is, whatever its eventType id in this export.
enum class NvtxKind {
  mark,           // NvtxMark: an instant
  push_pop,       // NvtxPushPopRange (and NvtxtPushPopRange, imported from .nvtxt files)
  start_end,      // NvtxStartEndRange (and NvtxtStartEndRange)
  push_only,      // NvtxPushRange: pushed, not popped before the capture ended
  start_only,     // NvtxStartRange: started, not ended before the capture ended
  end_only,       // NvtxPopRange / NvtxEndRange: closes a range opened before the capture
  domain_create,  // NvtxDomainCreate: names a domain id
  other,          // categories, thread names, domain destroy: nothing to import
  unknown,        // an id neither the file nor the historical table names
};

// A table's rows keyed by their position in the file, as nsys wrote them.
class Export {
 public:
  // Throws InputError when the file is missing, not SQLite or not an nsys export.
  explicit Export(const std::string& path);

  const std::string& path() const { return path_; }
  const Connection& conn() const { return c_; }

  bool has(const std::string& table) const { return columns_.count(table) != 0; }
  bool has(const std::string& table, const std::string& column) const;
  // Throws InputError naming the file, the table, the column and the export version.
  void require(const std::string& table, const std::string& column) const;
  // Refuses a value of `table`.`column` that is not an integer (or NULL where `nullable`): a
  // timestamp or id stored as text would read as 0. Skips a column the table lacks.
  void require_integers(const std::string& table, const std::string& column,
                        bool nullable = true) const;
  // `alias.column` when the table has the column, else NULL: one query for every version.
  std::string col(const std::string& table, const std::string& alias,
                  const std::string& column) const;
  // A name column as text: an id into StringIds (every export since 2019), or the text itself
  // in the oldest ones. Adds the join it needs to `joins`. Throws when the column holds ids
  // but the file has no StringIds.
  std::string name_expr(const std::string& table, const std::string& alias,
                        const std::string& column, std::string& joins) const;

  // EXPORT_SCHEMA_VERSION and EXPORT_PRODUCT_VERSION ("" when the file has no metadata).
  const std::string& schema_version() const { return schema_version_; }
  const std::string& nsys_version() const { return nsys_version_; }
  // "export schema 2.9.1, nsys 2022.2.1.31", for messages.
  std::string describe() const;
  std::optional<std::int64_t> session_start_utc_ns() const;
  // "0: NVIDIA A100-SXM4-40GB; 1: ..." from TARGET_INFO_GPU ("" when absent).
  std::string gpus() const;

  NvtxKind nvtx_kind(std::int64_t event_type) const;
  // Where the NVTX ids came from: "ENUM_NSYS_EVENT_TYPE" or "historical ids".
  const std::string& nvtx_ids_source() const { return nvtx_ids_source_; }
  // CUDA memcpy and memory kinds by id: the file's ENUM tables, else nsys' historical labels.
  std::string memcpy_kind(std::optional<std::int64_t> id) const;
  std::string memory_kind(std::optional<std::int64_t> id) const;

 private:
  void load_schema();
  void load_metadata();
  void load_enums();
  std::map<std::int64_t, std::string> read_enum(const std::string& table,
                                                const std::string& column) const;

  std::string path_;
  Connection c_;
  std::map<std::string, std::map<std::string, std::string>> columns_;  // table -> column -> type
  std::string schema_version_, nsys_version_;
  std::map<std::int64_t, NvtxKind> nvtx_kinds_;
  std::string nvtx_ids_source_;
  std::map<std::int64_t, std::string> memcpy_kinds_, memory_kinds_;
};

// nsys packs ids into one integer: (host/vm << 48) | (pid << 24) | tid. A process is named by
// everything above the thread bits, so processes of different hosts in one report differ.
inline std::int64_t process_key(std::int64_t global_id) {
  return global_id >> 24;
}
inline std::int64_t pid_of(std::int64_t global_id) {
  return (global_id >> 24) & 0xFFFFFF;
}
inline std::int64_t tid_of(std::int64_t global_tid) {
  return global_tid & 0xFFFFFF;
}

}  // namespace mactune::db::nsys
