#include "db/db_error.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

namespace mactune::db {
namespace {

namespace fs = std::filesystem;

std::string seconds_text(int ms) {
  char buf[32];
  if (ms % 1000 == 0)
    std::snprintf(buf, sizeof buf, "%d s", ms / 1000);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
  return buf;
}

std::string message(const std::string& file, DbFailure f, int code, int sys_errno, int timeout_ms,
                    const std::string& subject) {
  std::string why = sqlite3_errstr(code);
  if (sys_errno != 0 &&
      (f == DbFailure::disk_full || f == DbFailure::io_error || f == DbFailure::cannot_open))
    why += std::string(": ") + std::strerror(sys_errno);
  switch (f) {
    case DbFailure::corrupt:
      return file + ": the database is corrupt (" + why +
             "); restore it from a copy, or merge the shards it came from again";
    case DbFailure::locked:
      return file + ": locked by another process" +
             (timeout_ms > 0 ? " for over " + seconds_text(timeout_ms) : std::string()) +
             " (a mactune writing to it, or an open sqlite3 shell); run the command again when "
             "it is done, or set MACTUNE_DB_TIMEOUT (seconds) to wait longer";
    case DbFailure::interrupted:
      return file +
             ": interrupted while waiting for the lock another process holds on it; everything "
             "stored before the signal is kept: run the same command again to resume";
    case DbFailure::disk_full:
      return file + ": the disk is full (" + why +
             "); the change in progress was rolled back and everything stored before it is "
             "kept: free space, then run the same command again (a tune resumes where it "
             "stopped)";
    case DbFailure::io_error: {
      const int ext = code;
      const char* doing =
          ext == SQLITE_IOERR_WRITE || ext == SQLITE_IOERR_SHMSIZE || ext == SQLITE_IOERR_TRUNCATE
              ? " while writing"
          : ext == SQLITE_IOERR_READ || ext == SQLITE_IOERR_SHORT_READ ? " while reading"
          : ext == SQLITE_IOERR_FSYNC || ext == SQLITE_IOERR_DIR_FSYNC ? " while syncing"
                                                                       : "";
      return file + ": I/O error" + doing + " (" + why +
             "); everything stored before it is kept: check the disk (space, quota, file size "
             "limit), then run the same command again";
    }
    case DbFailure::read_only:
      return file + ": cannot be written (" + why +
             "); check the permissions of the file and its folder, or pass another --db";
    case DbFailure::cannot_open:
      return file + ": cannot be opened (" + why +
             "); check that it and its folder exist and can be read";
    case DbFailure::foreign:
      return file + ": not a mactune database this build can read: it has no " + subject +
             " (a database of another tool, or one changed by hand); nothing was changed";
    case DbFailure::schema_conflict:
      return file + ": its tables do not match its schema version: a migration adds " + subject +
             ", which it has already (changed by hand or by another tool); the file was left at "
             "its previous schema version";
    case DbFailure::missing_value:
      return file + ": a value to store for " + subject +
             " is missing or not a number (NaN); nothing of this change was stored";
    case DbFailure::duplicate:
      return file + ": a row with the same key (" + subject +
             ") was stored by another process at the same moment; nothing of this change was "
             "stored: run the command again (it finds the row stored)";
    case DbFailure::constraint:
      return file + ": a " + subject +
             " constraint of the database failed; nothing of this change was stored (a file "
             "changed by hand, or a mactune bug: please report it)";
    case DbFailure::statement:
      return file + ": a database statement failed (" + subject +
             "); nothing of this change was stored (a file changed by hand, or a mactune bug: "
             "please report it)";
  }
  return file + ": " + why;
}

// ---- The lock wait.

std::atomic<const std::atomic<bool>*> g_interrupt{nullptr};
std::mutex g_notice_mutex;
std::function<void(const std::string&, int)> g_notice;

}  // namespace

std::string_view failure_name(DbFailure f) {
  switch (f) {
    case DbFailure::corrupt:
      return "corrupt";
    case DbFailure::locked:
      return "locked";
    case DbFailure::interrupted:
      return "interrupted";
    case DbFailure::disk_full:
      return "disk_full";
    case DbFailure::io_error:
      return "io_error";
    case DbFailure::read_only:
      return "read_only";
    case DbFailure::cannot_open:
      return "cannot_open";
    case DbFailure::foreign:
      return "foreign";
    case DbFailure::schema_conflict:
      return "schema_conflict";
    case DbFailure::missing_value:
      return "missing_value";
    case DbFailure::duplicate:
      return "duplicate";
    case DbFailure::constraint:
      return "constraint";
    case DbFailure::statement:
      return "statement";
  }
  return "?";
}

DbError::DbError(std::string file, DbFailure failure, int code, std::string detail, int sys_errno,
                 int timeout_ms, std::string subject)
    : SqliteError(message(file, failure, code, sys_errno, timeout_ms, subject), code),
      file_(std::move(file)),
      detail_(std::move(detail)),
      subject_(std::move(subject)),
      failure_(failure),
      sys_errno_(sys_errno),
      timeout_ms_(timeout_ms) {}

DbError DbError::for_file(const std::string& file) const {
  return DbError(file, failure_, this->code(), detail_, sys_errno_, timeout_ms_, subject_);
}

namespace detail {

bool classify(int code, int sys_errno, DbFailure* out) {
  switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      *out = DbFailure::corrupt;
      return true;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:
      *out = DbFailure::locked;
      return true;
    case SQLITE_FULL:
      *out = DbFailure::disk_full;
      return true;
    case SQLITE_IOERR:
      *out = sys_errno == ENOSPC || sys_errno == EDQUOT || sys_errno == EFBIG ? DbFailure::disk_full
                                                                              : DbFailure::io_error;
      return true;
    case SQLITE_READONLY:
    case SQLITE_PERM:
      *out = DbFailure::read_only;
      return true;
    case SQLITE_CANTOPEN:
      *out = DbFailure::cannot_open;
      return true;
    default:
      return false;
  }
}

DbFailure statement_failure(int code, std::string_view errmsg, std::string* subject) {
  const auto after = [&](std::string_view prefix) -> std::optional<std::string> {
    const auto at = errmsg.find(prefix);
    if (at == std::string_view::npos) return std::nullopt;
    std::string rest(errmsg.substr(at + prefix.size()));
    while (!rest.empty() && (rest.back() == ')' || rest.back() == ' ')) rest.pop_back();
    return rest;
  };
  if (code == SQLITE_CONSTRAINT_NOTNULL) {
    *subject = after("constraint failed: ").value_or("a column");
    return DbFailure::missing_value;
  }
  if (code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY) {
    *subject = after("constraint failed: ").value_or("a unique key");
    return DbFailure::duplicate;
  }
  if ((code & 0xff) == SQLITE_CONSTRAINT) {
    *subject = code == SQLITE_CONSTRAINT_FOREIGNKEY ? "foreign key"
               : code == SQLITE_CONSTRAINT_CHECK    ? "check"
                                                    : "consistency";
    return DbFailure::constraint;
  }
  if (auto t = after("no such table: ")) {
    *subject = "table '" + *t + "'";
    return DbFailure::foreign;
  }
  if (auto c = after("no such column: ")) {
    *subject = "column '" + *c + "'";
    return DbFailure::foreign;
  }
  if (auto c = after("duplicate column name: ")) {
    *subject = "column '" + *c + "'";
    return DbFailure::schema_conflict;
  }
  *subject = errmsg.empty() ? std::string(sqlite3_errstr(code)) : std::string(errmsg);
  // SQLite's message names what failed; a statement's text never reaches it, but a syntax
  // error quotes a token of it ("near \"x\": syntax error"): keep only the condition.
  if (const auto near = subject->find("near \""); near != std::string::npos)
    *subject = sqlite3_errstr(code);
  return DbFailure::statement;
}

std::string relative_display(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  if (ec) return path;
  const fs::path rel = abs.lexically_normal().lexically_relative(fs::current_path(ec));
  if (!ec && !rel.empty() && *rel.begin() != "..") return rel.string();
  return abs.lexically_normal().string();
}

std::string display_name(sqlite3* db) {
  const char* name = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  if (name == nullptr || *name == '\0') return "the database";
  return relative_display(name);
}

// One connection's lock wait: sqlite calls busy() with the number of earlier calls for the
// same lock; a return of 0 gives up (the statement fails with SQLITE_BUSY).
struct LockWait {
  sqlite3* db = nullptr;
  int timeout_ms = 0;
  std::chrono::steady_clock::time_point started{}, interrupted_at{};
  bool noticed = false, interrupted = false;
};

// After the signal a wait goes on this long: a lock held for a commit (another shard's) is
// still taken, so that the run can be marked interrupted, and a lock held for long is not.
constexpr int kInterruptGraceMs = 100;

namespace {
// What the last wait on this thread ended with, for the error that follows it.
thread_local struct {
  sqlite3* db = nullptr;
  bool interrupted = false;
  int timeout_ms = 0;
} t_last_wait;

int busy(void* arg, int calls) {
  auto* w = static_cast<LockWait*>(arg);
  const auto now = std::chrono::steady_clock::now();
  if (calls == 0) {
    w->started = now;
    w->noticed = w->interrupted = false;
    t_last_wait = {w->db, false, w->timeout_ms};
  }
  if (interrupt_requested()) {
    if (!w->interrupted) {
      w->interrupted = true;
      w->interrupted_at = now;
    }
    if (now - w->interrupted_at >= std::chrono::milliseconds(kInterruptGraceMs)) {
      t_last_wait = {w->db, true, w->timeout_ms};
      return 0;
    }
  }
  const auto waited_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - w->started).count();
  if (waited_ms >= w->timeout_ms) return 0;
  if (!w->noticed && waited_ms >= 1000) {
    w->noticed = true;
    std::function<void(const std::string&, int)> notice;
    {
      std::lock_guard<std::mutex> lock(g_notice_mutex);
      notice = g_notice;
    }
    if (notice) notice(display_name(w->db), w->timeout_ms);
  }
  // Short sleeps: a lock held for milliseconds (another shard's commit) costs milliseconds,
  // and a signal is seen within 10 ms.
  const long long step_ms = std::min<long long>(
      {1LL << std::min(calls, 3), 10LL, std::max<long long>(1, w->timeout_ms - waited_ms)});
  std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  return 1;
}
}  // namespace

LockWait* new_lock_wait(sqlite3* db, int timeout_ms) {
  auto* w = new LockWait{db, timeout_ms};
  sqlite3_busy_handler(db, busy, w);
  return w;
}

void delete_lock_wait(LockWait* w) {
  delete w;
}

void set_lock_timeout(LockWait* w, int timeout_ms) {
  w->timeout_ms = timeout_ms;
}

[[noreturn]] void throw_db_error(sqlite3* db, int code, std::string detail) {
  const int sys_errno = db != nullptr ? sqlite3_system_errno(db) : 0;
  DbFailure f{};
  if (!classify(code, sys_errno, &f)) {
    std::string subject;
    const char* msg = db != nullptr ? sqlite3_errmsg(db) : nullptr;
    f = statement_failure(code, msg != nullptr ? msg : "", &subject);
    throw DbError(display_name(db), f, code, std::move(detail), sys_errno, 0, std::move(subject));
  }
  int timeout_ms = 0;
  if (f == DbFailure::locked && t_last_wait.db == db && db != nullptr) {
    if (t_last_wait.interrupted) f = DbFailure::interrupted;
    timeout_ms = t_last_wait.timeout_ms;
  }
  if (f == DbFailure::locked && interrupt_requested()) f = DbFailure::interrupted;
  throw DbError(display_name(db), f, code, std::move(detail), sys_errno, timeout_ms);
}

}  // namespace detail

int default_lock_timeout_ms() {
  const char* env = std::getenv("MACTUNE_DB_TIMEOUT");
  if (env == nullptr || *env == '\0') return 30000;
  char* end = nullptr;
  const double s = std::strtod(env, &end);
  MACTUNE_REQUIRE(end != env && *end == '\0' && std::isfinite(s) && s >= 0 && s <= 86400 * 7,
                  "MACTUNE_DB_TIMEOUT='", env,
                  "' is not a number of seconds (0 to 604800) to wait for a locked database");
  return static_cast<int>(std::lround(s * 1000));
}

void set_interrupt_flag(const std::atomic<bool>* flag) {
  g_interrupt.store(flag);
}

bool interrupt_requested() {
  const std::atomic<bool>* f = g_interrupt.load();
  return f != nullptr && f->load();
}

void set_lock_wait_notice(std::function<void(const std::string&, int)> notice) {
  std::lock_guard<std::mutex> lock(g_notice_mutex);
  g_notice = std::move(notice);
}

}  // namespace mactune::db
