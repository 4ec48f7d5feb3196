// `mactune slurm` without a cluster (label `host`): the scripts it writes, run by hand with
// bash as Slurm would run them (SLURM_ARRAY_TASK_ID per task, then the finish job), resume and
// re-planning, scripts for a GPU the machine lacks, and its errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>

#include "tests/slurm/local_slurm.h"
#include "tests/slurm/slurm_fixtures.h"

namespace mactune::test_slurm {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs a written script with bash in `dir`, as a batch job would (`task` < 0: no array task).
Ran run_script(const TempDir& dir, const std::string& script, int task) {
  std::vector<std::string> args = {"env"};
  if (task >= 0) args.push_back("SLURM_ARRAY_TASK_ID=" + std::to_string(task));
  args.insert(args.end(), {"bash", dir.file(script)});
  return run_program(args, dir.path(), 120);
}

TEST(SlurmScripts, TheArrayAndTheFinishJobRunByHandEqualEmitAndResume) {
  TempDir dir;
  dir.write("sweep.yaml", sweep_spec("hand", 0.05));
  auto r = run_mactune(dir, {"slurm", "sweep.yaml", "--shards", "3", "-o", "jobs", "-p", "cpu",
                             "--sbatch=--account=tuning"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "shard  points  stored  to measure")) << r.out;
  EXPECT_TRUE(has(r.out, "<= 0.2s by the time caps (4 points x 0.05 s)")) << r.out;
  EXPECT_TRUE(has(r.out, "--time=00:11:00 per task")) << r.out;
  const std::string tune = read_file(dir.file("jobs/tune.sbatch"));
  const std::string finish = read_file(dir.file("jobs/finish.sbatch"));
  for (const char* line :
       {"#SBATCH --array=0-2\n", "#SBATCH --requeue\n", "#SBATCH --open-mode=append\n",
        "#SBATCH --partition=cpu\n", "#SBATCH --exclusive", "#SBATCH --time=00:11:00\n",
        "#SBATCH --account=tuning\n", " tune ", " --backend cpu --shard \"$shard/3\""})
    EXPECT_TRUE(has(tune, line)) << line << "\n" << tune;
  EXPECT_FALSE(has(tune, "--gpus-per-task")) << tune;
  for (const char* line :
       {"#SBATCH --kill-on-invalid-dep=yes\n", "#SBATCH --partition=cpu\n", " db merge ",
        "shard-{0..2}.db -o \"$db\"", "--dry-run --check",
        " emit --db \"$db\" --device auto --tie-tolerance 0.05 --ties tolerance -q",
        " report --db \"$db\""})
    EXPECT_TRUE(has(finish, line)) << line << "\n" << finish;

  for (int i = 0; i < 3; ++i) {
    const Ran t = run_script(dir, "jobs/tune.sbatch", i);
    ASSERT_EQ(t.rc, 0) << t.out << t.err;
    EXPECT_TRUE(has(t.out, "mactune slurm: shard " + std::to_string(i) + "/3")) << t.out;
  }
  // A task that runs again finds its shard stored and measures nothing.
  const Ran again = run_script(dir, "jobs/tune.sbatch", 1);
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_TRUE(has(again.out, "0 measured, 4 already stored")) << again.out;
  const Ran f = run_script(dir, "jobs/finish.sbatch", -1);
  ASSERT_EQ(f.rc, 0) << f.out << f.err;
  EXPECT_TRUE(has(f.out, "12 points, 12 stored, 0 to measure")) << f.out;
  EXPECT_TRUE(std::filesystem::exists(dir.file("reports/hand/report.md")));
  expect_finish_table_equals_emit(dir, "hand", 3);

  // Planned again: every shard is stored, so no array job, and the times come from the run.
  r = run_mactune(dir, {"slurm", "sweep.yaml", "--shards", "3", "-o", "jobs"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "every shard is stored: no array job")) << r.out;
}

TEST(SlurmScripts, OnlyTheShardsWithPointsLeftAreSubmittedAgain) {
  TempDir dir;
  dir.write("sweep.yaml", sweep_spec("part", 0.05));
  auto r = run_mactune(dir, {"slurm", "sweep.yaml", "--shards", "4", "-o", "jobs"});
  ASSERT_EQ(r.rc, 0) << r.err;
  for (int i : {0, 2}) ASSERT_EQ(run_script(dir, "jobs/tune.sbatch", i).rc, 0);
  r = run_mactune(dir,
                  {"slurm", "sweep.yaml", "--shards", "4", "-o", "jobs", "--max-parallel", "1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(read_file(dir.file("jobs/tune.sbatch")), "#SBATCH --array=1,3%1\n"));
  // Shards 1 and 3 are timed from the points of 0 and 2 measured in the same buckets.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n +1 +3 +0 +3 +<= .*from earlier runs)")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n +2 +3 +3 +0 +nothing to measure)")))
      << r.out;
}

// A login node has no GPU: the scripts for a GPU spec are written all the same, for the
// partition's GPUs, and the plan lists the spec's points.
TEST(SlurmScripts, ScriptsForAGpuThisMachineLacks) {
  TempDir dir;
  dir.write("gpu.yaml",
            "name: gpu\ndevice: {backend: cuda, name: '*NoSuchGPU*'}\n"
            "kernels:\n  cuda: {chunk_tokens: [128, 256]}\n"
            "workload: {batch: [1, 2], context: [32K, 64K], hit_rate: [0, 1]}\n"
            "measure: {time_cap: 10}\n");
  const auto r = run_mactune(dir, {"slurm", "gpu.yaml", "--shards", "4", "-p", "gpu",
                                   "--gpus-per-task", "h200:1", "--cpus-per-task", "8"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "16 points for cuda '*NoSuchGPU*' (not this machine")) << r.out;
  EXPECT_TRUE(has(r.out, "<= 40s by the time caps (4 points x 10 s)")) << r.out;
  const std::string tune = read_file(dir.file("slurm/gpu/tune.sbatch"));
  for (const char* line :
       {"#SBATCH --array=0-3\n", "#SBATCH --gpus-per-task=h200:1\n", "#SBATCH --cpus-per-task=8\n",
        "#SBATCH --partition=gpu\n", " --backend cuda --shard \"$shard/4\""})
    EXPECT_TRUE(has(tune, line)) << line << "\n" << tune;
  EXPECT_FALSE(has(tune, "--exclusive")) << tune;
  const std::string finish = read_file(dir.file("slurm/gpu/finish.sbatch"));
  EXPECT_TRUE(has(finish, "--device '*NoSuchGPU*'")) << finish;
  EXPECT_FALSE(has(finish, "gpus")) << "the finish job needs no GPU\n" << finish;
}

TEST(SlurmScripts, BadArgumentsAreOneLineWithExit2) {
  TempDir dir;
  dir.write("sweep.yaml", sweep_spec("bad"));
  dir.write("auto.yaml", "name: auto\nworkload: {context: [512]}\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--shards", "0"}, "--shards 0: the grid of sweep.yaml has 12 points"},
      {{"--shards", "13"}, "--shards 13: the grid of sweep.yaml has 12 points"},
      {{"--shards", "3", "--time", "soon"}, "--time 'soon': expected a Slurm time limit"},
      {{"--shards", "3", "--gpus-per-task", "2"}, "--gpus-per-task 2: mactune tune measures one"},
      {{"--shards", "3", "--sbatch", "account=x"}, "--sbatch 'account=x': expected one sbatch"},
      {{"--shards", "3", "-p", "a b"}, "--partition 'a b' is empty or has white space"},
  };
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = {"slurm", "sweep.yaml"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_mactune(dir, args);
    EXPECT_EQ(r.rc, 2) << message;
    EXPECT_EQ(r.err_lines(), 1) << r.err;
    EXPECT_EQ(r.err.rfind("mactune: error: " + message, 0), 0u) << r.err;
  }
  auto r = run_mactune(dir, {"slurm", "auto.yaml", "--shards", "1"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "device.backend is auto")) << r.err;
  // --submit where there is no sbatch: the scripts are written, the error says so.
  const char* path = std::getenv("PATH");
  const std::string saved = path ? path : "";
  setenv("PATH", "/nonexistent", 1);
  r = run_mactune(dir, {"slurm", "sweep.yaml", "--shards", "2", "--submit"});
  setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_TRUE(has(r.err, "mactune: error: --submit: sbatch is not on PATH")) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.file("slurm/bad/tune.sbatch")));
}

}  // namespace
}  // namespace mactune::test_slurm
