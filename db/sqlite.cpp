#include "db/sqlite.h"

#include <cstdio>
#include <sstream>

#include "db/db_error.h"

namespace mactune::db {

namespace detail {

void sqlite_check_failed(sqlite3* db, int rc, const char* file, int line, const char* call) {
  std::ostringstream out;
  out << file << ':' << line << ": " << call << " failed: " << sqlite3_errstr(rc);
  // sqlite3_errmsg is specific ("no such table: x") where errstr is generic; skip duplicates.
  if (db != nullptr) {
    const char* msg = sqlite3_errmsg(db);
    if (msg != nullptr && std::string_view(msg) != sqlite3_errstr(rc)) out << " (" << msg << ')';
  }
  throw_db_error(db, db != nullptr ? sqlite3_extended_errcode(db) : rc, out.str());
}

}  // namespace detail

namespace {
// "file:/a/b%3F.db?mode=ro" -> the path as the user would name it.
std::string display_name_of_uri(const std::string& uri) {
  if (uri.rfind("file:", 0) != 0) return uri;
  std::string path;
  for (std::size_t i = 5; i < uri.size() && uri[i] != '?' && uri[i] != '#'; ++i) {
    if (uri[i] == '%' && i + 2 < uri.size()) {
      path += static_cast<char>(std::stoi(uri.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      path += uri[i];
    }
  }
  return detail::relative_display(path);
}
}  // namespace

Connection::Connection(const std::string& path, int flags) {
  const int timeout_ms = default_lock_timeout_ms();  // may throw: before anything is open
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // sqlite allocates a handle even on failure, to carry the message.
    std::ostringstream out;
    out << "cannot open '" << path << "': " << (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    const int code = db_ ? sqlite3_extended_errcode(db_) : rc;
    const int sys_errno = db_ ? sqlite3_system_errno(db_) : 0;
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    DbFailure f{};
    if (detail::classify(code, sys_errno, &f))
      throw DbError(display_name_of_uri(path), f, code, out.str(), sys_errno);
    std::string subject;
    f = detail::statement_failure(code, msg, &subject);
    throw DbError(display_name_of_uri(path), f, code, out.str(), sys_errno, 0, subject);
  }
  sqlite3_extended_result_codes(db_, 1);
  wait_ = detail::new_lock_wait(db_, timeout_ms);
}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    detail::delete_lock_wait(wait_);
    db_ = other.db_;
    wait_ = other.wait_;
    other.db_ = nullptr;
    other.wait_ = nullptr;
  }
  return *this;
}

Connection::~Connection() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
  detail::delete_lock_wait(wait_);
}

void Connection::set_lock_timeout(int timeout_ms) {
  MACTUNE_CHECK(wait_ != nullptr, "set_lock_timeout on a closed connection");
  detail::set_lock_timeout(wait_, timeout_ms);
}

void Connection::exec(std::string_view sql) {
  const std::string s(sql);
  MACTUNE_SQLITE_CHECK(db_, sqlite3_exec(db_, s.c_str(), nullptr, nullptr, nullptr));
}

Statement Connection::prepare(std::string_view sql) const {
  return Statement(db_, sql);
}

std::int64_t Connection::scalar_int(std::string_view sql) const {
  Statement s(db_, sql);
  return s.step() ? s.int64(0) : 0;
}

bool Connection::table_exists(std::string_view name, std::string_view schema) const {
  Statement s(db_, "SELECT 1 FROM " + sql_ident(schema) +
                       ".sqlite_master WHERE type IN ('table','view') AND name = ?1");
  s.bind(1, name);
  return s.step();
}

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  MACTUNE_SQLITE_CHECK(
      db_, sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr));
  MACTUNE_CHECK(stmt_ != nullptr, "empty SQL statement: '", sql, "'");
}

Statement::~Statement() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Statement& Statement::bind(int i, std::int64_t v) {
  MACTUNE_SQLITE_CHECK(db_, sqlite3_bind_int64(stmt_, i, v));
  return *this;
}
Statement& Statement::bind(int i, double v) {
  MACTUNE_SQLITE_CHECK(db_, sqlite3_bind_double(stmt_, i, v));
  return *this;
}
Statement& Statement::bind(int i, std::string_view v) {
  MACTUNE_SQLITE_CHECK(
      db_, sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}
Statement& Statement::bind_null(int i) {
  MACTUNE_SQLITE_CHECK(db_, sqlite3_bind_null(stmt_, i));
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  detail::sqlite_check_failed(db_, rc, __FILE__, __LINE__, sqlite3_sql(stmt_));
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int c) const {
  const auto* p = sqlite3_column_text(stmt_, c);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c)));
}

Transaction::Transaction(Connection& c) : c_(c) {
  c_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(c_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  c_.exec("COMMIT");
  done_ = true;
}

namespace {
std::string quoted(std::string_view s, char q) {
  std::string out(1, q);
  for (char ch : s) {
    out += ch;
    if (ch == q) out += ch;
  }
  out += q;
  return out;
}
}  // namespace

std::string sql_literal(std::string_view s) {
  return quoted(s, '\'');
}
std::string sql_ident(std::string_view s) {
  return quoted(s, '"');
}

std::string file_uri(std::string_view path, std::string_view query) {
  std::string out = "file:";
  for (unsigned char ch : path) {
    if (ch == '%' || ch == '?' || ch == '#' || ch < 0x20) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  if (!query.empty()) out.append("?").append(query);
  return out;
}

}  // namespace mactune::db
