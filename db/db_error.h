// What can go wrong with a database file that is not a bug: it is damaged, locked by another
// process, on a full disk, unreadable or unwritable. Every SQLite call that fails with one of
// these result codes throws DbError, whose message is the one line the CLI prints
// ("<file>: <condition>; <what was kept and what to do>"); the SQL text, file:line and
// SQLite's own message stay in detail() for debugging. Every other failure of a statement is
// translated the same way (one translation for every statement): a missing table or column
// ("not a mactune database this build can read"), a migration meeting a column that exists, a
// NOT NULL failure (a value missing or NaN), a UNIQUE failure (a row another process stored at
// the same moment), any other constraint or SQL error; no message holds SQL text or a source
// path.
//
// The lock wait: a connection waits for another process's lock up to its timeout (30 s, or
// MACTUNE_DB_TIMEOUT seconds), polling every few milliseconds, and gives up at once when the
// process's interrupt flag is set (a tune's Ctrl-C). A process may register a notice shown
// once per wait after a second of waiting, so that a blocked command says why it is blocked.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "db/sqlite.h"

namespace mactune::db {

enum class DbFailure {
  corrupt,          // SQLITE_CORRUPT, SQLITE_NOTADB: the file's contents are damaged
  locked,           // SQLITE_BUSY, SQLITE_LOCKED, SQLITE_PROTOCOL: another process holds the lock
  interrupted,      // gave up waiting for a lock because the process was asked to stop
  disk_full,        // SQLITE_FULL, or an I/O error with ENOSPC / EDQUOT / EFBIG
  io_error,         // any other SQLITE_IOERR
  read_only,        // SQLITE_READONLY, SQLITE_PERM: the file or its folder cannot be written
  cannot_open,      // SQLITE_CANTOPEN: the file (or its -wal / -shm) cannot be opened
  foreign,          // SQLITE_ERROR "no such table / column": not a database this build can read
  schema_conflict,  // SQLITE_ERROR "duplicate column name": a migration meets its own column
  missing_value,    // SQLITE_CONSTRAINT_NOTNULL: a value to store is missing (or NaN)
  duplicate,        // SQLITE_CONSTRAINT_UNIQUE / PRIMARYKEY: the row is stored already
  constraint,       // any other constraint (foreign key, check)
  statement,        // any other failure of a statement (a bug, or a file changed by hand)
};

std::string_view failure_name(DbFailure f);

class DbError : public SqliteError {
 public:
  // `file` as the user should read it; `detail` the SQL-level description.
  // `subject`: what the failure is about, from SQLite's message without SQL ("column
  // 'version'", "measurements.error_mean"), for the statement failures.
  DbError(std::string file, DbFailure failure, int code, std::string detail, int sys_errno = 0,
          int timeout_ms = 0, std::string subject = "");
  const std::string& file() const { return file_; }
  DbFailure failure() const { return failure_; }
  const std::string& detail() const { return detail_; }
  // The same failure reported against another name (a temporary file renamed at the end).
  DbError for_file(const std::string& file) const;

 private:
  std::string file_, detail_, subject_;
  DbFailure failure_;
  int sys_errno_, timeout_ms_;
};

namespace detail {
// The failure a result code (with the OS errno of the call) means, or false for a failure of
// the statement itself (translated by statement_failure()).
bool classify(int code, int sys_errno, DbFailure* out);
// The failure of a statement from its result code and SQLite's message (`errmsg`), and the
// subject of the message.
DbFailure statement_failure(int code, std::string_view errmsg, std::string* subject);
// The name of the database file behind `db` ("main"), relative to the working directory when
// it lies below it, as the user typed it in the common case.
std::string display_name(sqlite3* db);
std::string relative_display(const std::string& path);
}  // namespace detail

// ---- Waiting for locks.

// The lock timeout of connections opened without one: MACTUNE_DB_TIMEOUT (seconds, may be
// fractional) when set, else 30 s. Throws InputError naming the variable when it is not a
// number >= 0.
int default_lock_timeout_ms();

// The flag a waiting connection checks (a signal handler sets it); nullptr: none. The flag
// must outlive every connection that waits while it is set.
void set_interrupt_flag(const std::atomic<bool>* flag);
bool interrupt_requested();

// Called once per wait, from the waiting thread, after a second of waiting:
// notice(file, timeout_ms). Empty: no notice.
void set_lock_wait_notice(std::function<void(const std::string&, int)> notice);

}  // namespace mactune::db
