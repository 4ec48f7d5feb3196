// A thin RAII layer over the SQLite C API: a connection, prepared statements with typed binds
// and columns, transactions, and MACTUNE_SQLITE_CHECK. Nothing here knows mactune's schema.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/error.h"

namespace mactune::db {

// A failed SQLite call. `code` is the extended result code (SQLITE_BUSY, SQLITE_CORRUPT, ...),
// so callers can tell "file is not a database" from "database is locked".
class SqliteError : public Error {
 public:
  SqliteError(const std::string& what, int code) : Error(what), code_(code) {}
  int code() const { return code_; }
  int primary_code() const { return code_ & 0xff; }

 private:
  int code_;
};

namespace detail {
// Out of line and cold: names file:line, the call, the result code and sqlite's own message.
// Throws DbError (db/db_error.h) for a damaged, locked, full or unwritable file, else
// SqliteError.
[[noreturn, gnu::noinline, gnu::cold]] void sqlite_check_failed(sqlite3* db, int rc,
                                                                const char* file, int line,
                                                                const char* call);
[[noreturn]] void throw_db_error(sqlite3* db, int code, std::string detail);
struct LockWait;  // a connection's busy handler state (db/db_error.cpp)
LockWait* new_lock_wait(sqlite3* db, int timeout_ms);
void delete_lock_wait(LockWait* w);
void set_lock_timeout(LockWait* w, int timeout_ms);
inline bool sqlite_ok(int rc) {
  return rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE;
}
}  // namespace detail

}  // namespace mactune::db

// Evaluates `call` (an sqlite3_* function returning a result code) once; on anything but
// SQLITE_OK / SQLITE_ROW / SQLITE_DONE throws mactune::db::SqliteError naming file:line.
#define MACTUNE_SQLITE_CHECK(handle, call)                                                         \
  do {                                                                                             \
    const int mactune_sqlite_rc_ = (call);                                                         \
    if (!::mactune::db::detail::sqlite_ok(mactune_sqlite_rc_)) [[unlikely]]                        \
      ::mactune::db::detail::sqlite_check_failed((handle), mactune_sqlite_rc_, __FILE__, __LINE__, \
                                                 #call);                                           \
  } while (0)

namespace mactune::db {

class Statement;

// One open database file. Move-only; closes on destruction. It waits for another process's
// lock up to its lock timeout (default_lock_timeout_ms(), db/db_error.h), and stops waiting
// when the process's interrupt flag is set.
class Connection {
 public:
  Connection() = default;
  // flags: SQLITE_OPEN_* (READONLY or READWRITE|CREATE, plus URI). Throws SqliteError.
  Connection(const std::string& path, int flags);
  Connection(Connection&& other) noexcept : db_(other.db_), wait_(other.wait_) {
    other.db_ = nullptr;
    other.wait_ = nullptr;
  }
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  sqlite3* handle() const { return db_; }
  bool is_open() const { return db_ != nullptr; }
  void set_lock_timeout(int timeout_ms);

  // Runs one or more statements that return no rows of interest.
  void exec(std::string_view sql);
  Statement prepare(std::string_view sql) const;
  // The first column of the first row of `sql` as an integer (0 when there is no row).
  std::int64_t scalar_int(std::string_view sql) const;
  bool table_exists(std::string_view name, std::string_view schema = "main") const;
  std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  int changes() const { return sqlite3_changes(db_); }

 private:
  sqlite3* db_ = nullptr;
  detail::LockWait* wait_ = nullptr;  // owned; its address is the busy handler's argument
};

// A prepared statement. Parameters are 1-based, columns 0-based, as in the C API.
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
    other.stmt_ = nullptr;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& operator=(Statement&&) = delete;
  ~Statement();

  Statement& bind(int i, std::int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, long long v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, double v);
  Statement& bind(int i, std::string_view v);
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Statement& bind_null(int i);
  template <class T>
  Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }
  // Binds NULL for an id of 0 (this codebase's "no row").
  Statement& bind_id(int i, std::int64_t id) { return id > 0 ? bind(i, id) : bind_null(i); }

  // Steps once: true when a row is available, false when done. Throws on errors.
  bool step();
  // Steps to completion, for statements that return no rows.
  void run();
  void reset();

  int column_count() const { return sqlite3_column_count(stmt_); }
  std::string column_name(int c) const { return sqlite3_column_name(stmt_, c); }
  bool is_null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  int column_type(int c) const { return sqlite3_column_type(stmt_, c); }
  std::int64_t int64(int c) const { return sqlite3_column_int64(stmt_, c); }
  int int32(int c) const { return sqlite3_column_int(stmt_, c); }
  double real(int c) const { return sqlite3_column_double(stmt_, c); }
  std::string text(int c) const;
  std::optional<double> opt_real(int c) const {
    return is_null(c) ? std::nullopt : std::optional<double>(real(c));
  }
  std::optional<std::int64_t> opt_int64(int c) const {
    return is_null(c) ? std::nullopt : std::optional<std::int64_t>(int64(c));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE on construction (the write lock is taken up front, so two writers wait on
// the busy timeout instead of deadlocking on an upgrade); ROLLBACK unless commit() was called.
class Transaction {
 public:
  explicit Transaction(Connection& c);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Connection& c_;
  bool done_ = false;
};

// Quoting for generated SQL: a string literal ('it''s') and an identifier ("my""table").
std::string sql_literal(std::string_view s);
std::string sql_ident(std::string_view s);

// A "file:" URI naming `path` (for SQLITE_OPEN_URI and ATTACH), with an optional query such
// as "mode=ro" or "immutable=1". Connections are opened through URIs so that ATTACH can take
// them, and so that no path is ever mistaken for one.
std::string file_uri(std::string_view path, std::string_view query = "");

}  // namespace mactune::db
