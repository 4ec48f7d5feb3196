// `mactune profile` takes every field of the shape, the MAC settings, the forced hits and both
// engines' configs as a flag derived from its field table: its name ('_' as '-'), its range
// (one-line error, exit 2), and the same flags again in the command `--nsys` prints.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "kernels/cpu/engine_config.h"
#include "kernels/cuda/engine_config.h"
#include "kernels/forced.h"
#include "kernels/problem.h"
#include "tests/cli_process.h"

namespace mactune {
namespace {

struct Dir {
  std::string path() const { return std::filesystem::temp_directory_path().string(); }
};

test_cli::CliResult profile(std::vector<std::string> args) {
  args.insert(args.begin(), "profile");
  return test_cli::run_mactune(Dir{}, args);
}

template <class S>
void expect_flags(const std::string& help, std::initializer_list<std::string_view> renamed = {}) {
  for (const Field<S>& f : fields_of<S>()) {
    std::string flag = "--" + std::string(f.name);
    for (char& c : flag)
      if (c == '_') c = '-';
    for (std::string_view r : renamed)
      if (r == f.name) flag = "--cuda-" + flag.substr(2);
    EXPECT_NE(help.find(flag), std::string::npos) << flag << " missing from:\n" << help;
  }
}

TEST(ProfileCli, EveryFieldOfEveryTableIsAFlag) {
  const auto r = profile({"--help"});
  ASSERT_EQ(r.rc, 0) << r.err;
  expect_flags<Problem>(r.out);
  expect_flags<MacParams>(r.out);
  expect_flags<ForcedHits>(r.out);
  expect_flags<cpu::EngineConfig>(r.out);
  expect_flags<cuda::EngineConfig>(r.out, {"full"});  // `--full` profiles the baseline
}

TEST(ProfileCli, FlagsAreCheckedByTheirFields) {
  auto r = profile({"--block-rows", "129"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find("mactune: error: --block-rows: value 129 is out of range"),
            std::string::npos)
      << r.err;
  r = profile({"--pick", "farthest"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--pick: unknown pick rule 'farthest'"), std::string::npos) << r.err;
}

TEST(ProfileCli, TheNsysCommandRepeatsEverySetting) {
  const auto r = profile({"--backend", "cpu", "--accept-eps", "0.5", "--min-context", "0",
                          "--chunk-tokens", "64", "--hit-rate", "0.9", "--lag", "1:8", "--nsys"});
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* want : {"--accept-eps 0.5", "--min-context 0", "--chunk-tokens 64",
                           "--hit-rate 0.9", "--lag 'uniform(1,8)'", "--rectify forward"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " missing from: " << r.out;
}

TEST(ProfileCli, ShortCpuLoopRunsWithTheNewFlags) {
  const auto r = profile({"--backend",     "cpu", "--batch",      "1",  "--context",    "96",
                          "--q-heads",     "4",   "--kv-heads",   "2",  "--head-dim",   "64",
                          "--K",           "32",  "--r",          "16", "--accept-eps", "0.5",
                          "--min-context", "0",   "--block-rows", "32", "--threads",    "1",
                          "--steps",       "2",   "--warmup",     "0"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("profile: mac_cpu_"), std::string::npos) << r.out;
}

// Issue 30: SIGTERM is honoured at once (also while the loop draws its inputs), what was
// measured is summarized, and the exit status says the signal (128 + 15), not 0.
TEST(ProfileCli, SigtermStopsAtOnceWithTheSignalsStatus) {
  test_cli::CliOptions o;
  o.signal = SIGTERM;
  o.timeout_s = 60;
  int sig = 0;
  o.term_signal = &sig;
  const auto t0 = std::chrono::steady_clock::now();
  o.kill_when = [&] { return std::chrono::steady_clock::now() - t0 > std::chrono::seconds(3); };
  const auto r = test_cli::run_mactune(
      Dir{}, {"profile", "--backend", "cpu", "--context", "2048", "--steps", "100000"}, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.killed);
  EXPECT_LT(s, 10) << "took " << s << " s to stop";
  // Stopped in the loop (the usual case): summarized, exit 143. Stopped while the session was
  // still being set up (a slow machine): ended by the signal itself.
  EXPECT_TRUE(r.rc == 128 + SIGTERM || sig == SIGTERM) << r.rc << " " << r.err;
  if (r.rc == 128 + SIGTERM) {
    EXPECT_NE(r.out.find("interrupted"), std::string::npos) << r.out;
  }
}

// ---- Flags that cannot apply are refused, not ignored (issue 30).

void expect_refused(const test_cli::CliResult& r, const std::string& part) {
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find(part), std::string::npos) << part << " in " << r.err;
}

TEST(ProfileCli, CudaOnlyFlagsOnTheCpuAreRefused) {
  expect_refused(profile({"--backend", "cpu", "--dram", "--steps", "1"}),
                 "--dram applies to --backend cuda only");
  expect_refused(profile({"--backend", "cpu", "--no-cupti", "--steps", "1"}),
                 "--no-cupti applies to --backend cuda only");
  expect_refused(profile({"--backend", "cpu", "--min-chunk", "64", "--steps", "1"}),
                 "a CUDA engine flag is given with --backend cpu");
}

TEST(ProfileCli, SkipRatioNeedsItsQuota) {
  expect_refused(profile({"--skip-ratio", "0.9", "--steps", "1"}), "--skip-ratio needs --quota");
  expect_refused(profile({"--quota", "skip-ratio", "--hit-rate", "0.5", "--steps", "1"}),
                 "--hit-rate with --quota skip-ratio");
}

TEST(ProfileCli, ForcedHitsWithFullAreRefused) {
  expect_refused(profile({"--full", "--hit-rate", "0.5", "--steps", "1"}),
                 "--full runs plain attention");
}

TEST(ProfileCli, SeedAndStepsAreChecked) {
  expect_refused(profile({"--seed", "-1"}), "--seed");
  expect_refused(profile({"--steps", "1e9"}), "--steps 1000000000");
  expect_refused(profile({"--steps", "2.5"}), "not an integer");
}

}  // namespace
}  // namespace mactune
