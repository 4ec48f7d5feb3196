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
constexpr long long kContexts[] = {4096, 8192};
constexpr int kPairs = 4 * 6 * 2;  // workloads, each measured by MAC and full attention
constexpr int kRounds = 8;         // writers killed before the one that completes

double median_of(int batch, double hit, const std::string& family) {
  return 1e-5 * batch * (family == "mac" ? 1.0 - 0.5 * hit : 1.0);
}

// The writer: a tuner's loop in miniature. Each point is a MAC measurement and its
// full-attention baseline, stored together in one transaction; each committed pair is
// reported on `ack_fd` (one byte), so the parent knows what must survive.
[[noreturn]] void writer(const std::string& path, int ack_fd) {
  int rc = 0;
  try {
    Store s = Store::open(path);
    const Id device = s.upsert_device(test_device());
    const Id build = s.upsert_build(test_build());
    const Id run = s.begin_run({.spec_text = "crash", .device_id = device, .build_id = build});
    const Id mac = s.upsert_instance(test_instance("mac"));
    const Id full = s.upsert_instance(test_instance("full"));
    for (long long context : kContexts)
      for (int batch : kBatches)
        for (double hit : kHitRates) {
          const Id workload = s.upsert_workload(test_workload(batch, context, hit));
          Measurement pair[2];
          for (int side = 0; side < 2; ++side) {
            Measurement& m = pair[side];
            m.point = {device, build, side ? full : mac, "threads=2", workload, "cpu-wall", true};
            m.run_id = run;
            m.stats = test_stats(median_of(batch, hit, side ? "full" : "mac"));
            m.notes = std::string(2000, 'x');  // rows over several pages: a kill can split one
          }
          if (s.has_measurement(pair[0].point) && s.has_measurement(pair[1].point)) continue;
          s.record_measurements(pair);
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
  for (int round = 0; round < kRounds; ++round) {
    Child c = start_writer(path);
    // Time one pair, then kill at a different phase of the next pair each round: between
    // transactions, inside the first row's write, inside the second's, inside the commit.
    ASSERT_EQ(wait_acks(c, 1), 1) << "round " << round;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(wait_acks(c, 1), 1) << "round " << round;
    const auto pair_time = std::chrono::steady_clock::now() - t0;
    std::this_thread::sleep_for(pair_time * (round + 0.5) / kRounds);
    kill(c.pid, SIGKILL);
    int status = 0;
    waitpid(c.pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status)) << "round " << round;
    committed += 2 + wait_acks(c, kPairs);  // acks the writer sent before dying
    close(c.ack_fd);

    Store s = Store::open(path);  // reopening recovers the WAL
    auto ic = s.connection().prepare("PRAGMA integrity_check");
    ASSERT_TRUE(ic.step());
    EXPECT_EQ(ic.text(0), "ok");
    EXPECT_FALSE(s.connection().prepare("PRAGMA foreign_key_check").step());
    const auto rows = s.connection().scalar_int("SELECT COUNT(*) FROM measurements");
    EXPECT_EQ(rows % 2, 0) << "half a pair survived, round " << round;
    EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM (SELECT workload_id FROM measurements"
                                        " GROUP BY workload_id HAVING COUNT(*) != 2)"),
              0);
    const auto stored = rows / 2;
    // Every acknowledged pair is there; at most one more (committed, ack not yet sent).
    EXPECT_GE(stored, committed) << "round " << round;
    EXPECT_LE(stored, committed + 1) << "round " << round;
    committed = static_cast<int>(stored);
  }

  Child c = start_writer(path);  // resume to the end
  wait_acks(c, kPairs);
  int status = 0;
  waitpid(c.pid, &status, 0);
  close(c.ack_fd);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);

  Store s = Store::open(path, {.mode = OpenMode::read_only});
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 2 * kPairs);
  const Id device = *s.find_device(test_device());
  const auto rows = s.measurements({.device_id = device});
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(2 * kPairs));
  std::set<std::string> seen;
  for (const MeasurementRow& r : rows) {
    // Exactly once, with the values its writer computed: no torn or mixed rows.
    EXPECT_TRUE(seen.insert(r.instance.name + "|" + r.workload.key()).second);
    EXPECT_EQ(r.m.stats.median_s, median_of(r.workload.problem.batch, r.workload.forced.hit_rate,
                                            std::string(name_of(r.instance.family))));
    EXPECT_EQ(r.m.notes.size(), 2000u);
  }
  // Both sides of every point come from one run: the speedup is a ratio from one run.
  EXPECT_EQ(s.connection().scalar_int(
                "SELECT COUNT(*) FROM (SELECT workload_id FROM measurements GROUP BY workload_id"
                " HAVING COUNT(DISTINCT run_id) != 1)"),
            0);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM runs"), kRounds + 1);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM runs WHERE status = 'finished'"), 1);
}

}  // namespace
}  // namespace mactune::db
