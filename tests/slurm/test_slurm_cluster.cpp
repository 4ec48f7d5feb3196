// `mactune slurm --submit` against a real Slurm (label `slurm`): a single-node cluster started
// by the test (tests/slurm/local_slurm.h) runs a small CPU spec as a 3-shard array; one task
// is stopped part way and requeued (`scontrol requeue`, what preemption does) and resumes its
// shard; the dependent job merges, checks, emits and reports; its table must equal what
// `mactune emit` decides from the same stored rows, with every point stored exactly once.
//
// Skipped, with what failed, only where Slurm cannot start (the packages missing, munged or a
// daemon refusing to run). MACTUNE_REQUIRE_SLURM=1 (CI sets it) makes that a failure instead.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <thread>

#include "tests/slurm/local_slurm.h"
#include "tests/slurm/slurm_fixtures.h"

namespace mactune::test_slurm {
namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// "JobState=PENDING" of `scontrol show job ID` ("" when Slurm no longer knows the job).
std::string job_state(const LocalSlurm& slurm, const std::string& id) {
  const Ran r = slurm.command({"scontrol", "show", "job", id});
  static const std::regex re(R"(JobState=([A-Z_]+))");
  std::smatch m;
  return r.rc == 0 && std::regex_search(r.out, m, re) ? m[1].str() : "";
}

TEST(SlurmCluster, ArrayWithARequeuedTaskResumesAndItsTableEqualsEmit) {
  const auto t0 = std::chrono::steady_clock::now();
  LocalSlurm slurm;
  std::string why;
  if (!slurm.start(&why)) {
    const char* require = std::getenv("MACTUNE_REQUIRE_SLURM");
    if (require && std::string(require) == "1") FAIL() << "Slurm cannot start: " << why;
    GTEST_SKIP() << "Slurm cannot start here: " << why;
  }
  const double started_s = since(t0);
  TempDir dir;
  dir.write("sweep.yaml", sweep_spec("sweep", 0.2));
  auto r = run_mactune(dir, {"slurm", "sweep.yaml", "--shards", "3", "-o", "jobs", "--partition",
                             slurm.partition(), "--time", "5", "--cpus-per-task", "1", "--submit"});
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex(R"(submitted array job (\d+) \(3 tasks\) and finish job (\d+))")))
      << r.out;
  const std::string array = m[1], finish = m[2];
  const std::string task0 = array + "_0";
  const std::string shard0 = dir.file("jobs/shards/shard-0.db");
  auto logs = [&] {
    std::string s = "\n" + slurm.logs();
    for (const auto& e : std::filesystem::directory_iterator(dir.file("jobs/logs")))
      s += "\n--- " + e.path().filename().string() + "\n" + read_file(e.path().string());
    return s;
  };

  // Part way: the first of the shard's 4 points is stored, the others are not.
  ASSERT_TRUE(LocalSlurm::wait_for([&] { return mac_rows(shard0) >= 1; }, 60))
      << "task 0 stored nothing" << logs();
  const Ran rq = slurm.command({"scontrol", "requeue", task0});
  ASSERT_EQ(rq.rc, 0) << rq.err << logs();
  // A requeued job waits two minutes before it may start again; let it go now.
  ASSERT_TRUE(LocalSlurm::wait_for([&] { return job_state(slurm, task0) == "PENDING"; }, 30))
      << job_state(slurm, task0) << logs();
  // slurmd remembers the requeued job's revoked credential to the second and kills a launch
  // whose credential was made in that same second ("Killing non-startable batch job: Job
  // credential revoked", then the finish job's dependency fails): a quarter of the runs here
  // before this wait. Let the clock pass into the next second before releasing it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const Ran up = slurm.command({"scontrol", "update", "JobId=" + task0, "StartTime=now"});
  ASSERT_EQ(up.rc, 0) << up.err << logs();

  std::string state;
  const bool done = LocalSlurm::wait_for(
      [&] {
        state = job_state(slurm, finish);
        return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" ||
               state == "TIMEOUT" || state.empty();
      },
      120);
  ASSERT_TRUE(done) << "the finish job is still " << state << logs();
  ASSERT_EQ(state, "COMPLETED") << logs();
  const double finished_s = since(t0);

  // The requeued shard: stopped part way (its run interrupted with some points stored), then
  // run again, which measured only the rest.
  const auto runs = runs_of(shard0);
  ASSERT_EQ(runs.size(), 2u) << logs();
  EXPECT_EQ(runs[0].first, "interrupted");
  EXPECT_EQ(runs[1].first, "finished");
  EXPECT_GE(runs[0].second, 1);
  EXPECT_LT(runs[0].second, 4) << "task 0 finished before the requeue reached it";
  EXPECT_EQ(runs[0].second + runs[1].second, 4);
  const std::string log0 = read_file(dir.file("jobs/logs/tune-" + array + "_0.log"));
  EXPECT_NE(log0.find("restart 0"), std::string::npos) << log0;
  EXPECT_NE(log0.find("restart 1"), std::string::npos) << log0;
  for (const char* shard : {"jobs/shards/shard-1.db", "jobs/shards/shard-2.db"}) {
    const auto other = runs_of(dir.file(shard));
    ASSERT_EQ(other.size(), 1u) << shard;
    EXPECT_EQ(other[0], (std::pair<std::string, int>{"finished", 4})) << shard;
  }

  const std::string finish_log = read_file(dir.file("jobs/logs/finish-" + finish + ".log"));
  EXPECT_NE(finish_log.find("12 points, 12 stored, 0 to measure"), std::string::npos) << finish_log;
  EXPECT_TRUE(std::filesystem::exists(dir.file("reports/sweep/report.md"))) << finish_log;
  expect_finish_table_equals_emit(dir, "sweep", 3);

  if (std::getenv("MACTUNE_KEEP_SLURM")) {  // the scripts, shards and logs, for a look
    std::error_code ec;
    std::filesystem::copy(dir.file("jobs"), slurm.dir() + "/jobs",
                          std::filesystem::copy_options::recursive, ec);
    std::cout << "kept " << slurm.dir() << "\n";
  }
  std::cout << "slurm test: cluster up in " << started_s << " s, array and finish job done "
            << finished_s - started_s << " s later, " << since(t0) << " s in all\n";
}

}  // namespace
}  // namespace mactune::test_slurm
