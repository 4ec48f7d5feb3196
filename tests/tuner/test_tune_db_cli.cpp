// `mactune tune / emit / report` against databases in trouble, through the real binary: shards
// creating one new file together, a missing file, a lock held by another process (Ctrl-C
// while waiting, a timeout), a full disk; each failure one line naming the file, exit 2,
// nothing stored lost, and a rerun resumes.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstring>
#include <functional>

#include <chrono>
#include <filesystem>
#include <set>
#include <tuple>

#include "cli_util.h"
#include "db/store.h"

namespace mactune::tuner {
namespace {

namespace fs = std::filesystem;
using testing::CliOptions;
using testing::CliResult;
using testing::read_file;
using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;

using PointId = std::tuple<std::string, std::string, std::string, int>;
std::set<PointId> points_of(const std::string& path) {
  const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
  std::set<PointId> out;
  for (const auto& d : s.devices()) {
    db::MeasurementFilter f;
    f.device_id = d.id;
    f.ok_only = false;
    for (const auto& r : s.measurements(f))
      out.insert(
          {r.instance.name, r.m.point.params, r.workload.key(), static_cast<int>(r.m.status)});
  }
  return out;
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// Starts every command at once (forked before any is waited for) and waits for all of them.
std::vector<CliResult> run_together(const TempDir& dir,
                                    const std::vector<std::vector<std::string>>& commands) {
  std::vector<pid_t> pids;
  for (std::size_t k = 0; k < commands.size(); ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (chdir(dir.path().c_str()) != 0) _exit(119);
      const std::string n = std::to_string(k);
      if (!freopen(("together-out-" + n).c_str(), "w", stdout) ||
          !freopen(("together-err-" + n).c_str(), "w", stderr))
        _exit(120);
      std::vector<std::string> args = commands[k];
      args.insert(args.begin(), MACTUNE_CLI_BINARY);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(MACTUNE_CLI_BINARY, argv.data());
      _exit(122);
    }
    pids.push_back(pid);
  }
  std::vector<CliResult> out(commands.size());
  for (std::size_t k = 0; k < pids.size(); ++k) {
    int status = 0;
    waitpid(pids[k], &status, 0);
    out[k].rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    out[k].out = read_file(dir.file("together-out-" + std::to_string(k)));
    out[k].err = read_file(dir.file("together-err-" + std::to_string(k)));
  }
  return out;
}

TEST(TuneDbCli, TwoShardsStartedTogetherOnANewDatabaseBothStoreEveryPoint) {
  for (int round = 0; round < 2; ++round) {
    TempDir dir;
    dir.write("sh.yaml", tiny_spec("sh", "[1, 2]", "[256]", "[0, 1]", "[64]"));
    const auto rs = run_together(dir, {{"tune", "sh.yaml", "--shard", "0/2", "-q"},
                                       {"tune", "sh.yaml", "--shard", "1/2", "-q"}});
    for (const auto& r : rs) ASSERT_EQ(r.rc, 0) << "round " << round << ": " << r.err;
    EXPECT_EQ(points_of(dir.file("sh.db")).size(), 8u) << "round " << round;
  }
}

TEST(TuneDbCli, ReadingCommandsOnAMissingDatabaseSaySoAndCreateNothing) {
  TempDir dir;
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"emit", "--db", "typo.db", "-o", "t.json"},
        {"report", "--db", "typo.db", "-o", "rep"},
        {"db", "info", "--db", "typo.db"},
        {"db", "export", "--db", "typo.db"}}) {
    const auto r = run_mactune(dir, cmd);
    EXPECT_EQ(r.rc, 2) << cmd[0] << ": " << r.err;
    EXPECT_EQ(r.err, "mactune: error: database 'typo.db' does not exist\n") << cmd[0];
    EXPECT_FALSE(fs::exists(dir.file("typo.db"))) << cmd[0] << " created it";
    EXPECT_FALSE(fs::exists(dir.file("t.json"))) << cmd[0];
  }
}

// Ctrl-C while another process holds the lock: the tune stops within a fraction of a second
// (not when the lock is released), says why, and keeps what is stored; a rerun resumes.
TEST(TuneDbCli, CtrlCWhileWaitingForALockedDatabaseStopsAtOnce) {
  TempDir dir;
  dir.write("lk.yaml", tiny_spec("lk", "[1]", "[256]", "[0, 1]", "[64]"));
  auto r = run_mactune(dir, {"tune", "lk.yaml", "-q", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto before = points_of(dir.file("lk.db"));
  ASSERT_EQ(before.size(), 4u);
  dir.write("lk2.yaml", tiny_spec("lk", "[1, 2]", "[256]", "[0, 1]", "[64]"));

  db::Connection holder(db::file_uri(dir.file("lk.db")), SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI);
  holder.exec("BEGIN IMMEDIATE");
  // The waiting command says so after a second: that is when the signal is sent.
  const auto waiting = [&] {
    for (const auto& e : fs::directory_iterator(dir.path()))
      if (e.path().filename().string().rfind("stderr-", 0) == 0 &&
          read_file(e.path().string()).find("mactune: waiting for lk.db") != std::string::npos)
        return true;
    return false;
  };
  std::chrono::steady_clock::time_point signalled{};
  CliOptions o;
  o.signal = SIGINT;
  o.timeout_s = 20;  // the lock timeout is 30 s: the old behaviour fails here
  o.kill_when = [&] {
    if (!waiting()) return false;
    signalled = std::chrono::steady_clock::now();
    return true;
  };
  r = run_mactune(dir, {"tune", "lk2.yaml", "-q", "--no-report"}, o);
  const double after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  ASSERT_TRUE(r.killed) << r.err;
  EXPECT_LT(after_s, 3.0) << "the tune went on waiting after Ctrl-C";
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err.rfind("mactune: waiting for lk.db: locked by another process", 0), 0u) << r.err;
  EXPECT_EQ(r.err_lines(), 2) << r.err;
  EXPECT_EQ(
      last_line(r.err).rfind("mactune: error: lk.db: interrupted while waiting for the lock", 0),
      0u)
      << r.err;
  holder.exec("COMMIT");
  EXPECT_EQ(points_of(dir.file("lk.db")), before);
  r = run_mactune(dir, {"tune", "lk2.yaml", "-q", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto all = points_of(dir.file("lk.db"));
  EXPECT_EQ(all.size(), 8u);
  for (const auto& p : before) EXPECT_EQ(all.count(p), 1u);
}

TEST(TuneDbCli, LockHeldPastTheTimeoutIsOneLineNamingTheFile) {
  TempDir dir;
  dir.write("lt.yaml", tiny_spec("lt", "[1]", "[256]", "[0, 1]", "[64]"));
  auto r = run_mactune(dir, {"tune", "lt.yaml", "-q", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
  db::Connection holder(db::file_uri(dir.file("lt.db")), SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI);
  holder.exec("BEGIN IMMEDIATE");
  setenv("MACTUNE_DB_TIMEOUT", "0.2", 1);
  r = run_mactune(dir, {"emit", "--db", "lt.db", "-o", "lt2.json", "-q"});
  unsetenv("MACTUNE_DB_TIMEOUT");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_EQ(r.err.rfind("mactune: error: lt.db: locked by another process for over 0.2 s", 0), 0u)
      << r.err;
  EXPECT_EQ(r.err.find("INSERT"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("lt2.json")));
}

// A disk that fills during a sweep: one line naming the file and the condition, every point
// stored before it kept, and a rerun once there is space resumes and stores the rest.
// `fill(db_path)` limits the space; `make_room()` lifts the limit again.
void full_disk_case(const TempDir& dir, const std::string& sub, CliOptions o,
                    const std::vector<std::string>& conditions,
                    const std::function<void()>& make_room) {
  const std::string db = sub + "/fd.db";
  dir.write(sub + "/fd.yaml",
            tiny_spec("fd", "[1, 2, 3, 4]", "[256, 512]", "[0, 0.5, 1]", "[64, 128]"));
  const auto before = points_of(dir.file(db));
  ASSERT_EQ(before.size(), 4u);
  CliResult r = run_mactune(
      dir, {"tune", sub + "/fd.yaml", "--db", db, "-q", "--no-report", "--dispatch", "fd.json"}, o);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  bool named = false;
  for (const auto& c : conditions)
    named = named || r.err.rfind("mactune: error: " + db + ": " + c, 0) == 0;
  EXPECT_TRUE(named) << r.err;
  EXPECT_EQ(r.err.find("INSERT"), std::string::npos) << r.err;
  const auto partial = points_of(dir.file(db));
  for (const auto& p : before) EXPECT_EQ(partial.count(p), 1u) << "a stored point was lost";
  // The space ran out part way through the sweep, not before its first point.
  EXPECT_GT(partial.size(), before.size() + 8);
  EXPECT_LT(partial.size(), 4u * 2 * 3 * 2 * 2);
  make_room();
  r = run_mactune(
      dir, {"tune", sub + "/fd.yaml", "--db", db, "-q", "--no-report", "--dispatch", "fd.json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto all = points_of(dir.file(db));
  EXPECT_EQ(all.size(), 4u * 2 * 3 * 2 * 2);
  for (const auto& p : partial) EXPECT_EQ(all.count(p), 1u);
}

// A database of 2 points (4 rows) in `dir/sub`.
void small_database(const TempDir& dir, const std::string& sub) {
  dir.write("small.yaml", tiny_spec("fd", "[1]", "[256]", "[0, 1]", "[64]"));
  const auto r = run_mactune(
      dir, {"tune", "small.yaml", "--db", sub + "/fd.db", "-q", "--no-report", "--no-emit"});
  ASSERT_EQ(r.rc, 0) << r.err;
}

// The space runs out for this process: no file it writes may grow past a limit
// (RLIMIT_FSIZE), 512 KiB more than the database. SQLite sees a short write (disk full) or a
// refused one (an I/O error).
TEST(TuneDbCli, FileSizeLimitStopsWithOneLineKeepsEveryPointAndAResumeCompletes) {
  TempDir dir;
  fs::create_directory(dir.file("d"));
  small_database(dir, "d");
  CliOptions o;
  o.file_size_limit = static_cast<long long>(fs::file_size(dir.file("d/fd.db"))) + 512 * 1024;
  full_disk_case(dir, "d", o, {"the disk is full", "I/O error while writing"}, [] {});
}

// A real full file system: a tmpfs with 512 KiB free beside the database (needs the right to
// mount; skipped without it).
TEST(TuneDbCli, FullFileSystemStopsWithOneLineKeepsEveryPointAndAResumeCompletes) {
  TempDir dir;
  const std::string mnt = dir.file("tmpfs");
  fs::create_directory(mnt);
  small_database(dir, "small");
  const auto size_kib = fs::file_size(dir.file("small/fd.db")) / 1024 + 512;
  const std::string opts = "size=" + std::to_string(size_kib) + "k,mode=0777";
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, opts.c_str()) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << ")";
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  fs::copy_file(dir.file("small/fd.db"), mnt + "/fd.db");
  full_disk_case(dir, "tmpfs", {}, {"the disk is full"}, [&] {
    ASSERT_EQ(mount("tmpfs", mnt.c_str(), "tmpfs", MS_REMOUNT, "size=16m,mode=0777"), 0)
        << std::strerror(errno);
  });
}

}  // namespace
}  // namespace mactune::tuner
