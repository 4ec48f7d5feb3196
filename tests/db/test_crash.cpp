// Crash safety: a writer killed with SIGKILL while recording points loses no committed point
// and leaves no partial row; resuming records each remaining point exactly once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/db/fixtures.h"

namespace mactune::db {
namespace {

using testing::TempDir;
using testing::test_build;
using testing::test_device;
using testing::test_instance;
using testing::test_stats;
using testing::test_workload;

constexpr int kBatches[] = {1, 2, 4, 8};
constexpr double kHitRates[] = {0.0, 0.5, 0.9, 0.95, 0.99, 1.0};
constexpr const char* kFamilies[] = {"mac", "full"};
constexpr int kPoints = 4 * 6 * 2;

double median_of(int batch, double hit, const std::string& family) {
  return 1e-5 * batch * (family == "mac" ? 1.0 - 0.5 * hit : 1.0);
}

// The writer: a tuner's loop in miniature. Reports each committed point on `ack_fd` (one
// byte), so the parent knows what must survive.
[[noreturn]] void writer(const std::string& path, int ack_fd) {
  int rc = 0;
  try {
    Store s = Store::open(path);
    const Id device = s.upsert_device(test_device());
    const Id build = s.upsert_build(test_build());
    const Id run = s.begin_run({.spec_text = "crash", .device_id = device, .build_id = build});
    for (const char* family : kFamilies)
      for (int batch : kBatches)
        for (double hit : kHitRates) {
          Measurement m;
          m.point = {device,
                     build,
                     s.upsert_instance(test_instance(family)),
                     "threads=2",
                     s.upsert_workload(test_workload(batch, 8192, hit)),
                     "cpu-wall",
                     true};
          if (s.has_measurement(m.point)) continue;
          m.run_id = run;
          m.stats = test_stats(median_of(batch, hit, family));
          m.notes = std::string(2000, 'x');  // rows over several pages: a kill can split one
          s.record_measurement(m);
          const char ack = 1;
          if (write(ack_fd, &ack, 1) != 1) rc = 3;
        }
    s.finish_run(run, RunStatus::finished);
  } catch (...) {
    rc = 2;
  }
  _exit(rc);
}

struct Child {
  pid_t pid;
  int ack_fd;
};

Child start_writer(const std::string& path) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    writer(path, fds[1]);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// Reads acks until `n` arrived (or the writer ended); returns how many arrived.
int wait_acks(const Child& c, int n) {
  int got = 0;
  char buf[64];
  while (got < n) {
    const ssize_t r = read(c.ack_fd, buf, std::min<std::size_t>(sizeof buf, n - got));
    if (r <= 0) break;
    got += static_cast<int>(r);
  }
  return got;
}

TEST(Db_CrashSafety, SigkillMidWriteLosesNothingAndResumeCompletes) {
  TempDir dir;
  const std::string path = dir.file("crash.db");
  int committed = 0;
  for (int round = 0; round < 3; ++round) {
    Child c = start_writer(path);
    const int acked = wait_acks(c, 6);
    EXPECT_EQ(acked, 6) << "round " << round;
    // Kill without waiting for the next ack: the writer is inside its next transaction, or
    // about to be, when the signal lands.
    std::this_thread::sleep_for(std::chrono::microseconds(500 * (round + 1)));
    kill(c.pid, SIGKILL);
    int status = 0;
    waitpid(c.pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status)) << "round " << round;
    committed += acked + wait_acks(c, kPoints);  // acks the writer sent before dying
    close(c.ack_fd);

    Store s = Store::open(path);  // reopening recovers the WAL
    auto ic = s.connection().prepare("PRAGMA integrity_check");
    ASSERT_TRUE(ic.step());
    EXPECT_EQ(ic.text(0), "ok");
    EXPECT_FALSE(s.connection().prepare("PRAGMA foreign_key_check").step());
    const auto stored = s.connection().scalar_int("SELECT COUNT(*) FROM measurements");
    // Every acknowledged point is there; at most one more (committed, ack not yet sent).
    EXPECT_GE(stored, committed) << "round " << round;
    EXPECT_LE(stored, committed + 1) << "round " << round;
    committed = static_cast<int>(stored);
  }

  Child c = start_writer(path);  // resume to the end
  wait_acks(c, kPoints);
  int status = 0;
  waitpid(c.pid, &status, 0);
  close(c.ack_fd);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  Store s = Store::open(path, {.mode = OpenMode::read_only});
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), kPoints);
  const Id device = *s.find_device(test_device());
  const auto rows = s.measurements({.device_id = device});
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(kPoints));
  std::set<std::string> seen;
  for (const MeasurementRow& r : rows) {
    // Exactly once, with the values its writer computed: no torn or mixed rows.
    EXPECT_TRUE(seen.insert(r.instance.name + "|" + r.workload.key()).second);
    EXPECT_EQ(r.m.stats.median_s,
              median_of(r.workload.problem.batch, r.workload.hit_rate, r.instance.family));
    EXPECT_EQ(r.m.notes.size(), 2000u);
  }
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM runs"), 4);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM runs WHERE status = 'finished'"), 1);
}

}  // namespace
}  // namespace mactune::db
