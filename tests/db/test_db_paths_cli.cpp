// Issue 30 through the real binary, the database commands: no debris after SIGINT/SIGTERM
// (merge's temporary, -wal, -shm; an export's hidden temporary), no -wal/-shm beside a foreign
// file opened read-only, a FIFO input refused without blocking, SIGXFSZ as a failed write,
// stdout write errors as exit 2; SQLite failures as one plain line (no SQL text, no source
// path), a broken foreign key refused by merge, nsys exports with text timestamps, unknown
// string ids or kernels that end before they start refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "db/db_error.h"
#include "tests/cli_process.h"
#include "tests/db/fixtures.h"
#include "tests/db/nsys_fixtures.h"

#ifndef MACTUNE_CLI_BINARY
#error "MACTUNE_CLI_BINARY must name the mactune executable"
#endif

namespace mactune::db {
namespace {

namespace fs = std::filesystem;
using testing::add_keys;
using testing::ok_point;
using testing::TempDir;
using Result = test_cli::CliResult;

Result mactune(const TempDir& dir, std::vector<std::string> args,
               const test_cli::CliOptions& o = {}) {
  return test_cli::run_mactune(dir, std::move(args), o);
}

void expect_refused(const Result& r, std::initializer_list<std::string> parts) {
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err.rfind("mactune: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << "[" << p << "] in " << r.err;
}

// No SQL text and no source path in a message.
void expect_plain(const Result& r) {
  for (const char* bad : {"SELECT", "INSERT", "ALTER", ".cpp", "sqlite3_", "json.exception"})
    EXPECT_EQ(r.err.find(bad), std::string::npos) << bad << " in " << r.err;
}

// Raw SQL on a file, outside mactune's store (foreign keys off: damage can be made).
void sql(const std::string& path, const std::string& text) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "") << " in " << text;
  sqlite3_free(err);
  sqlite3_close(db);
}

// A small valid store: two measurements.
void small_store(const std::string& path) {
  Store s = Store::open(path);
  const testing::Keys k = add_keys(s);
  s.record_measurement(ok_point(k, k.mac, k.w0, 1e-4));
  s.record_measurement(ok_point(k, k.full, k.w0, 2e-4));
}

// A store whose workloads table holds `rows` rows: a merge or an export of it takes a while.
void big_store(const std::string& path, int rows) {
  small_store(path);
  std::string cols, select;
  {
    Store s = Store::open(path);
    auto q = s.connection().prepare("SELECT name FROM pragma_table_info('workloads') ORDER BY cid");
    while (q.step()) {
      const std::string c = q.text(0);
      if (c == "id") continue;
      cols += (cols.empty() ? "" : ", ") + c;
      select +=
          std::string(select.empty() ? "" : ", ") + (c == "key" ? "w.key || '#' || n.i" : "w." + c);
    }
  }
  sql(path, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
                std::to_string(rows) + ") INSERT INTO workloads (" + cols + ") SELECT " + select +
                " FROM (SELECT * FROM workloads LIMIT 1) w, n");
}

std::vector<std::string> debris(const TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string n = e.path().filename().string();
    if (n.find("tmp") != std::string::npos || n.find("-wal") != std::string::npos ||
        n.find("-shm") != std::string::npos || n.find("-journal") != std::string::npos)
      out.push_back(n);
  }
  return out;
}

bool has_file_containing(const TempDir& dir, const std::string& part) {
  for (const auto& e : fs::directory_iterator(dir.path()))
    if (e.path().filename().string().find(part) != std::string::npos) return true;
  return false;
}

// ---- Debris: a signal during a write.

class DbSignal : public ::testing::TestWithParam<int> {};

TEST_P(DbSignal, MergeToANewOutputLeavesNoTemporaryWalOrShm) {
  TempDir dir;
  big_store(dir.file("big.db"), 150000);
  test_cli::CliOptions o;
  o.signal = GetParam();
  o.kill_when = [&] { return has_file_containing(dir, "out.db.tmp-"); };
  int sig = 0;
  o.term_signal = &sig;
  const Result r = mactune(dir, {"db", "merge", "big.db", "-o", "out.db"}, o);
  ASSERT_TRUE(r.killed) << "the merge ended before the test saw its temporary: " << r.out;
  EXPECT_EQ(sig, GetParam()) << r.rc << " " << r.err;
  EXPECT_EQ(debris(dir), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(dir.file("out.db")));
}

TEST_P(DbSignal, ExportLeavesNoHiddenTemporary) {
  TempDir dir;
  big_store(dir.file("big.db"), 150000);
  test_cli::CliOptions o;
  o.signal = GetParam();
  o.kill_when = [&] { return has_file_containing(dir, ".x.csv.tmp"); };
  int sig = 0;
  o.term_signal = &sig;
  const Result r =
      mactune(dir, {"db", "export", "--db", "big.db", "--table", "workloads", "-o", "x.csv"}, o);
  ASSERT_TRUE(r.killed) << "the export ended before the test saw its temporary";
  EXPECT_EQ(sig, GetParam());
  EXPECT_EQ(debris(dir), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(dir.file("x.csv")));
}

INSTANTIATE_TEST_SUITE_P(Signals, DbSignal, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& param_info) {
                           return param_info.param == SIGINT ? "Sigint" : "Sigterm";
                         });

// ---- Debris: read-only opens of a foreign file.

TEST(DbForeign, ImportOfAMactuneDatabaseLeavesNoWalOrShmBesideIt) {
  TempDir dir;
  small_store(dir.file("not-nsys.db"));  // a WAL-mode file, closed: no -wal, no -shm
  ASSERT_EQ(debris(dir), std::vector<std::string>{});
  const Result r = mactune(dir, {"db", "import-nsys", "not-nsys.db", "--db", "t.db"});
  expect_refused(r, {"not-nsys.db", "is not an nsys SQLite export"});
  for (const char* s : {"-wal", "-shm"})
    EXPECT_FALSE(fs::exists(dir.file(std::string("not-nsys.db") + s))) << s;
  const Result s = mactune(dir, {"nsys", "summary", "not-nsys.db"});
  expect_refused(s, {"is not an nsys SQLite export"});
  for (const char* x : {"-wal", "-shm"})
    EXPECT_FALSE(fs::exists(dir.file(std::string("not-nsys.db") + x))) << x;
}

TEST(DbForeign, FifoAsAMergeInputIsRefusedWithoutBlocking) {
  TempDir dir;
  small_store(dir.file("t.db"));
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0644), 0);
  test_cli::CliOptions o;
  o.timeout_s = 20;
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused(mactune(dir, {"db", "merge", "t.db", "fifo", "-o", "o.db"}, o),
                 {"'fifo'", "a FIFO, not a regular file"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15);
  EXPECT_FALSE(fs::exists(dir.file("o.db")));
}

// ---- SIGXFSZ and stdout.

TEST(DbWrite, FileSizeLimitIsAFailedWriteWithAMessageNotSigxfsz) {
  TempDir dir;
  big_store(dir.file("big.db"), 2000);
  test_cli::CliOptions o;
  o.file_size_limit = 4096;
  o.sigxfsz_default = true;  // mactune must ignore it itself
  int sig = 0;
  o.term_signal = &sig;
  const Result r =
      mactune(dir, {"db", "export", "--db", "big.db", "--table", "workloads", "-o", "x.csv"}, o);
  EXPECT_EQ(sig, 0) << "killed by signal " << sig;
  expect_refused(r, {"cannot write export 'x.csv'", "file size limit"});
  EXPECT_EQ(debris(dir), std::vector<std::string>{});
}

TEST(DbWrite, ExportToAFullStdoutExitsTwoWithOneLine) {
  TempDir dir;
  big_store(dir.file("big.db"), 2000);
  test_cli::CliOptions o;
  o.stdout_path = "/dev/full";
  expect_refused(mactune(dir, {"db", "export", "--db", "big.db", "--table", "workloads"}, o),
                 {"cannot write to stdout", "the output is incomplete"});
}

TEST(DbWrite, InfoToAFullStdoutExitsTwo) {
  TempDir dir;
  small_store(dir.file("t.db"));
  test_cli::CliOptions o;
  o.stdout_path = "/dev/full";
  expect_refused(mactune(dir, {"db", "info", "--db", "t.db"}, o), {"cannot write to stdout"});
}

// ---- Unclear: one translation of SQLite failures.

TEST(DbMessage, ForeignSchemaVersionTableIsNotAMactuneDatabase) {
  TempDir dir;
  sql(dir.file("f.db"),
      "CREATE TABLE schema_version (v INTEGER); INSERT INTO schema_version VALUES (1)");
  const Result r = mactune(dir, {"db", "info", "--db", "f.db"});
  expect_refused(r, {"f.db", "not a mactune database this build can read"});
  expect_plain(r);
}

TEST(DbMessage, DroppedTableIsNamedWithoutSql) {
  TempDir dir;
  small_store(dir.file("t.db"));
  sql(dir.file("t.db"), "DROP VIEW IF EXISTS measurements_view; DROP TABLE break_even");
  const Result r = mactune(dir, {"db", "info", "--db", "t.db"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("t.db"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("break_even"), std::string::npos) << r.err;
  expect_plain(r);
}

TEST(DbMessage, MigrationMeetingAnExistingColumnSaysSo) {
  TempDir dir;
  small_store(dir.file("t.db"));
  // Pretend the file is at version 4 while it has version 5's column: migration 5 meets it.
  sql(dir.file("t.db"), "DELETE FROM schema_version WHERE version >= 5");
  small_store(dir.file("in.db"));
  const Result r = mactune(dir, {"db", "merge", "in.db", "-o", "t.db"});
  expect_refused(r, {"t.db", "a migration adds column 'samples_s', which it has already"});
  expect_plain(r);
}

TEST(DbMessage, NotNullFromNanAndUniqueAreTranslated) {
  TempDir dir;
  Connection c(file_uri(dir.file("x.db")),
               SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI);
  c.exec("CREATE TABLE t (k TEXT UNIQUE, v REAL NOT NULL)");
  auto ins = c.prepare("INSERT INTO t (k, v) VALUES (?1, ?2)");
  try {
    ins.bind(1, std::string_view("a")).bind(2, std::nan("")).run();
    FAIL() << "NaN stored in a NOT NULL column";
  } catch (const DbError& e) {
    EXPECT_EQ(e.failure(), DbFailure::missing_value);
    EXPECT_NE(
        std::string(e.what()).find("x.db: a value to store for t.v is missing or not a number"),
        std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("INSERT"), std::string::npos) << e.what();
    EXPECT_NE(e.detail().find("INSERT"), std::string::npos) << e.detail();  // kept for debugging
  }
  ins.reset();
  ins.bind(1, std::string_view("a")).bind(2, 1.0).run();
  ins.reset();
  try {
    ins.bind(1, std::string_view("a")).bind(2, 2.0).run();
    FAIL() << "a duplicate key stored";
  } catch (const DbError& e) {
    EXPECT_EQ(e.failure(), DbFailure::duplicate);
    EXPECT_NE(std::string(e.what()).find("stored by another process at the same moment"),
              std::string::npos)
        << e.what();
  }
}

TEST(DbMessage, MergeRefusesARowWithABrokenForeignKeyNamingIt) {
  TempDir dir;
  small_store(dir.file("in.db"));
  sql(dir.file("in.db"),
      "PRAGMA foreign_keys = OFF; DELETE FROM instances WHERE name LIKE 'full%'");
  const Result r = mactune(dir, {"db", "merge", "in.db", "-o", "o.db"});
  expect_refused(r, {"cannot merge 'in.db'", "of table measurements", "instances"});
  expect_plain(r);
  EXPECT_FALSE(fs::exists(dir.file("o.db")));
}

// ---- nsys exports with values that would import wrong.

void write_real_export(const std::string& path) {
  testing::write_export(path, testing::ExportSchema::real_2_9_1, testing::decode_profile(2, 2));
}

TEST(NsysValues, TextTimestampIsRefusedNotZero) {
  TempDir dir;
  write_real_export(dir.file("r.sqlite"));
  sql(dir.file("r.sqlite"),
      "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon' WHERE rowid = (SELECT MIN(rowid) FROM "
      "CUPTI_ACTIVITY_KIND_KERNEL)");
  const Result r = mactune(dir, {"db", "import-nsys", "r.sqlite", "--db", "t.db"});
  expect_refused(r, {"r.sqlite", "CUPTI_ACTIVITY_KIND_KERNEL", "start holds text 'soon'"});
}

TEST(NsysValues, UnknownStringIdIsRefusedNotAName) {
  TempDir dir;
  write_real_export(dir.file("r.sqlite"));
  sql(dir.file("r.sqlite"),
      "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 987654 WHERE rowid = (SELECT "
      "MIN(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)");
  const Result r = mactune(dir, {"db", "import-nsys", "r.sqlite", "--db", "t.db"});
  expect_refused(r, {"demangledName = 987654 is not an id in StringIds"});
}

TEST(NsysValues, KernelEndingBeforeItStartsIsRefused) {
  TempDir dir;
  write_real_export(dir.file("r.sqlite"));
  sql(dir.file("r.sqlite"),
      "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = start - 5 WHERE rowid = (SELECT MIN(rowid) "
      "FROM CUPTI_ACTIVITY_KIND_KERNEL)");
  const Result r = mactune(dir, {"nsys", "summary", "r.sqlite"});
  expect_refused(r, {"ends before it starts"});
}

}  // namespace
}  // namespace mactune::db
