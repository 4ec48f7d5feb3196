// A database under stress from outside: many processes creating one file at once, a lock held
// by another process past the timeout or interrupted, a full disk, damaged and read-only files
// opened for reading (no -wal / -shm left beside them), and merges whose inputs fail.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "db/db_error.h"
#include "db/merge.h"
#include "tests/db/fixtures.h"

namespace mactune::db {
namespace {

namespace fs = std::filesystem;
using testing::run_unprivileged;
using testing::TempDir;
using testing::test_build;
using testing::test_device;
using testing::test_instance;
using testing::test_stats;
using testing::test_workload;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// Point i of a test sweep: its own params, so every i is a distinct row.
Measurement point(Store& s, int i) {
  Measurement m;
  m.point = {s.upsert_device(test_device()),
             s.upsert_build(test_build()),
             s.upsert_instance(test_instance()),
             "chunk_tokens=" + std::to_string(64 * (i + 1)),
             s.upsert_workload(test_workload(1 + i % 4, 4096, 0.5)),
             "cpu-wall",
             true};
  m.stats = test_stats(1e-4 * (i + 1));
  m.notes = std::string(200, 'n');
  return m;
}

void write_db(const std::string& path, int n) {
  Store s = Store::open(path);
  for (int i = 0; i < n; ++i) s.record_measurement(point(s, i));
}

std::int64_t rows(const std::string& path) {
  const Store s = Store::open(path, {.mode = OpenMode::read_only});
  return s.connection().scalar_int("SELECT COUNT(*) FROM measurements");
}

// Files beside `path` that a reader must never leave (or, after a failure, any temporary).
std::vector<std::string> debris(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find("-wal") != std::string::npos || name.find("-shm") != std::string::npos ||
        name.find(".tmp") != std::string::npos || name.find("-journal") != std::string::npos)
      out.push_back(name);
  }
  return out;
}

// Overwrites one page in the middle of the file: the header stays valid, a table is damaged.
void damage_a_page(const std::string& path) {
  std::string bytes = read_bytes(path);
  ASSERT_GT(bytes.size(), 8u * 4096);
  const std::size_t page = bytes.size() / 4096 - 3;
  for (std::size_t i = page * 4096; i < (page + 1) * 4096; ++i) bytes[i] = static_cast<char>(0xA5);
  write_bytes(path, bytes);
}

template <class F>
DbError expect_db_error(F&& f, DbFailure failure) {
  try {
    f();
  } catch (const DbError& e) {
    EXPECT_EQ(failure_name(e.failure()), failure_name(failure)) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e;
  }
  ADD_FAILURE() << "expected a DbError (" << failure_name(failure) << ")";
  return DbError("", failure, 0, "");
}

// ---- Creation by many processes at once.

// Shards started together on a file that does not exist yet: every one must open it (creation,
// WAL setup and the schema wait for each other like any statement) and store its point.
TEST(Db_Concurrency, ProcessesCreatingOneNewDatabaseTogetherAllSucceed) {
  constexpr int kRounds = 12, kProcs = 6;
  for (int round = 0; round < kRounds; ++round) {
    TempDir dir;
    const std::string path = dir.file("new.db");
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    std::vector<pid_t> kids;
    for (int k = 0; k < kProcs; ++k) {
      const pid_t pid = fork();
      if (pid == 0) {
        close(go[1]);
        char c;
        // Every child blocks here until the parent closes the pipe: they start together.
        if (read(go[0], &c, 1) != 0) _exit(80);
        try {
          Store s = Store::open(path);
          s.record_measurement(point(s, k));
        } catch (const std::exception& e) {
          std::fprintf(stderr, "round %d child %d: %s\n", round, k, e.what());
          _exit(81);
        }
        _exit(0);
      }
      kids.push_back(pid);
    }
    close(go[0]);
    close(go[1]);
    for (const pid_t pid : kids) {
      int status = 0;
      waitpid(pid, &status, 0);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "round " << round << ": a process failed to open or write the new database";
    }
    EXPECT_EQ(rows(path), kProcs) << "round " << round;
    if (HasFailure()) break;
  }
}

// ---- Locks.

TEST(Db_Locks, LockHeldPastTheTimeoutIsOneLineNamingTheFileAndWritesNothing) {
  TempDir dir;
  const std::string path = dir.file("busy.db");
  write_db(path, 3);
  Store s = Store::open(path, {.busy_timeout_ms = 200});
  const Measurement m = point(s, 7);
  Connection holder(file_uri(path), SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI);
  holder.exec("BEGIN IMMEDIATE");
  const auto t0 = std::chrono::steady_clock::now();
  const DbError e = expect_db_error([&] { s.record_measurement(m); }, DbFailure::locked);
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited_s, 0.15) << "gave up before the timeout";
  const std::string what = e.what();
  EXPECT_NE(what.find("busy.db: locked by another process for over 0.2 s"), std::string::npos)
      << what;
  EXPECT_NE(what.find("MACTUNE_DB_TIMEOUT"), std::string::npos) << what;
  EXPECT_EQ(what.find("BEGIN"), std::string::npos) << "SQL in the message: " << what;
  EXPECT_FALSE(e.detail().empty());
  holder.exec("COMMIT");
  EXPECT_EQ(rows(path), 3);
  s.record_measurement(m);  // the lock released: the same write goes through
  EXPECT_EQ(rows(path), 4);
}

TEST(Db_Locks, InterruptEndsALockWaitWithinAFractionOfASecond) {
  TempDir dir;
  const std::string path = dir.file("busy.db");
  write_db(path, 2);
  Store s = Store::open(path);  // the default timeout: 30 s
  const Measurement m = point(s, 5);
  Connection holder(file_uri(path), SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI);
  holder.exec("BEGIN IMMEDIATE");

  // The signal arrives while the write waits: the notice (after a second of waiting) sets
  // the flag, as a Ctrl-C would.
  std::atomic<bool> stop{false};
  std::string noticed;
  set_interrupt_flag(&stop);
  std::chrono::steady_clock::time_point signalled{};
  set_lock_wait_notice([&](const std::string& file, int timeout_ms) {
    noticed = file + " " + std::to_string(timeout_ms);
    signalled = std::chrono::steady_clock::now();
    stop = true;
  });
  const DbError e = expect_db_error([&] { s.record_measurement(m); }, DbFailure::interrupted);
  const double after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  set_lock_wait_notice(nullptr);
  set_interrupt_flag(nullptr);
  EXPECT_NE(noticed.find("busy.db 30000"), std::string::npos) << noticed;
  EXPECT_LT(after_s, 2.0) << "the wait went on after the signal";
  EXPECT_NE(std::string(e.what()).find("busy.db: interrupted while waiting for the lock"),
            std::string::npos)
      << e.what();
  holder.exec("COMMIT");
  EXPECT_EQ(rows(path), 2);
}

TEST(Db_Locks, BadTimeoutVariableIsNamed) {
  setenv("MACTUNE_DB_TIMEOUT", "soon", 1);
  try {
    default_lock_timeout_ms();
    ADD_FAILURE() << "MACTUNE_DB_TIMEOUT=soon accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("MACTUNE_DB_TIMEOUT='soon'"), std::string::npos);
  }
  setenv("MACTUNE_DB_TIMEOUT", "1.5", 1);
  EXPECT_EQ(default_lock_timeout_ms(), 1500);
  unsetenv("MACTUNE_DB_TIMEOUT");
  EXPECT_EQ(default_lock_timeout_ms(), 30000);
}

// ---- A full disk.

// The file may not grow past a few pages more (what a full file system does to it): the write
// that does not fit fails as "disk full" naming the file, every point before it stays, and a
// new connection (space freed) resumes with the rest.
TEST(Db_DiskFull, FullDiskKeepsEveryStoredPointAndAResumeStoresTheRest) {
  TempDir dir;
  const std::string path = dir.file("full.db");
  constexpr int kPoints = 200;
  int stored = 0;
  {
    Store s = Store::open(path);
    for (; stored < 5; ++stored) s.record_measurement(point(s, stored));
    const auto pages = s.connection().scalar_int("PRAGMA page_count");
    s.connection().scalar_int("PRAGMA max_page_count = " + std::to_string(pages + 4));
    const DbError e = expect_db_error(
        [&] {
          for (; stored < kPoints; ++stored) s.record_measurement(point(s, stored));
        },
        DbFailure::disk_full);
    EXPECT_NE(std::string(e.what()).find("full.db: the disk is full"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("INSERT"), std::string::npos) << e.what();
    EXPECT_GT(stored, 5);
    EXPECT_LT(stored, kPoints);
  }
  EXPECT_EQ(rows(path), stored);
  {
    Store s = Store::open(path);
    for (int i = 0; i < kPoints; ++i) s.record_measurement(point(s, i));  // resume
    auto ic = s.connection().prepare("PRAGMA integrity_check");
    ASSERT_TRUE(ic.step());
    EXPECT_EQ(ic.text(0), "ok");
  }
  EXPECT_EQ(rows(path), kPoints);
}

// ---- Readers leave nothing beside the file.

TEST(Db_ReadOnlyOpen, HealthyDamagedAndWriteProtectedFilesGetNoWalOrShm) {
  TempDir dir;
  const std::string ok = dir.file("ok.db");
  write_db(ok, 40);
  {
    const Store s = Store::open(ok, {.mode = OpenMode::read_only});
    EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 40);
    EXPECT_TRUE(debris(dir.path()).empty()) << debris(dir.path()).front();
  }
  EXPECT_TRUE(debris(dir.path()).empty()) << debris(dir.path()).front();

  // A damaged page: the open succeeds, the read that reaches it fails as corrupt, by name.
  const std::string bad = dir.file("bad.db");
  write_db(bad, 40);
  damage_a_page(bad);
  const std::string bad_bytes = read_bytes(bad);
  const DbError e = expect_db_error(
      [&] {
        const Store s = Store::open(bad, {.mode = OpenMode::read_only});
        s.connection().scalar_int("SELECT SUM(length(notes)) FROM measurements");
        s.connection().scalar_int("PRAGMA integrity_check");
        s.table_counts();
      },
      DbFailure::corrupt);
  EXPECT_NE(std::string(e.what()).find("bad.db: the database is corrupt"), std::string::npos)
      << e.what();
  EXPECT_TRUE(debris(dir.path()).empty()) << debris(dir.path()).front();
  EXPECT_TRUE(read_bytes(bad) == bad_bytes);

  // Write-protected, read by a user who may write the folder but not the file.
  ASSERT_EQ(chmod(dir.path().c_str(), 0777), 0);
  ASSERT_EQ(chmod(ok.c_str(), 0444), 0);
  EXPECT_EQ(run_unprivileged([&] {
              const Store s = Store::open(ok, {.mode = OpenMode::read_only});
              return s.connection().scalar_int("SELECT COUNT(*) FROM measurements") == 40 ? 0 : 3;
            }),
            0);
  EXPECT_TRUE(debris(dir.path()).empty()) << debris(dir.path()).front();
}

TEST(Db_ReadOnlyOpen, ReaderSeesTheCommittedRowsOfALiveWriter) {
  TempDir dir;
  const std::string path = dir.file("live.db");
  write_db(path, 3);
  Store writer = Store::open(path);
  writer.record_measurement(point(writer, 10));  // in the writer's WAL, not the main file yet
  EXPECT_EQ(rows(path), 4);
  writer.record_measurement(point(writer, 11));
  EXPECT_EQ(rows(path), 5);
}

TEST(Db_Open, ACommandThatOnlyReadsNeverCreatesAMissingFile) {
  TempDir dir;
  for (const OpenOptions& o :
       {OpenOptions{.mode = OpenMode::read_only}, OpenOptions{.create = false}}) {
    try {
      Store::open(dir.file("typo.db"), o);
      ADD_FAILURE() << "a missing file was opened";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("database '" + dir.file("typo.db") + "' does not exist"),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fs::exists(dir.file("typo.db")));
  }
}

// ---- Merge: inputs first, then a temporary output renamed at the end.

TEST(Db_MergeFiles, ACorruptInputLeavesNoOutputAndNoTemporary) {
  TempDir dir;
  write_db(dir.file("a.db"), 10);
  write_db(dir.file("bad.db"), 40);
  damage_a_page(dir.file("bad.db"));
  try {
    merge_files({dir.file("a.db"), dir.file("bad.db")}, dir.file("out.db"));
    ADD_FAILURE() << "merged a corrupt input";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.db' is corrupt"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("out.db")));
  EXPECT_TRUE(debris(dir.path()).empty()) << debris(dir.path()).front();

  // A failure after the temporary output exists (two inputs disagree about an instance)
  // removes it too.
  {
    Store other = Store::open(dir.file("other.db"));
    auto i = test_instance();
    i.config += ",changed=1";
    other.upsert_instance(i);
  }
  try {
    merge_files({dir.file("a.db"), dir.file("other.db")}, dir.file("out.db"));
    ADD_FAILURE() << "merged inputs that disagree";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("other.db': instance"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("out.db")));
  EXPECT_TRUE(debris(dir.path()).empty()) << debris(dir.path()).front();

  const auto merged = merge_files({dir.file("a.db")}, dir.file("out.db"));
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].stats.of("measurements"), 10);
  EXPECT_EQ(rows(dir.file("out.db")), 10);
  EXPECT_TRUE(debris(dir.path()).empty()) << debris(dir.path()).front();
}

TEST(Db_MergeFiles, InputsInAReadOnlyFolderMergeAndGainNoFiles) {
  TempDir dir;
  const std::string ro = dir.file("ro"), w = dir.file("w");
  fs::create_directory(ro);
  fs::create_directory(w);
  write_db(ro + "/s0.db", 6);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod((ro + "/s0.db").c_str(), 0444), 0);
  ASSERT_EQ(chmod(ro.c_str(), 0555), 0);
  ASSERT_EQ(chmod(w.c_str(), 0777), 0);
  EXPECT_EQ(run_unprivileged([&] {
              const auto m = merge_files({ro + "/s0.db"}, w + "/out.db");
              return m.size() == 1 && m[0].stats.of("measurements") == 6 ? 0 : 3;
            }),
            0);
  EXPECT_EQ(rows(w + "/out.db"), 6);
  EXPECT_TRUE(debris(ro).empty()) << debris(ro).front();
  EXPECT_TRUE(debris(w).empty()) << debris(w).front();
  ASSERT_EQ(chmod(ro.c_str(), 0755), 0);
}

}  // namespace
}  // namespace mactune::db
