// Hostile input through the real binary (issue 16), one test per case, grouped per command:
// each refusal is one line "mactune: error: ..." naming the file, line or option and what is
// wrong, exit 2, within seconds, and leaves no file behind.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "cli_util.h"
#include "replay/safetensors.h"

namespace mactune::tuner {
namespace {

namespace fs = std::filesystem;
using testing::CliOptions;
using testing::CliResult;
using testing::expect_refused;
using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;
using testing::write_trace;

// Every file under `dir` whose name holds "tmp" or "partial": debris of a failed write.
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.find("tmp") != std::string::npos || n.find("partial") != std::string::npos)
      out.push_back(n);
  }
  return out;
}

// A spec that names its line numbers: the tiny spec with one workload line replaced.
std::string spec_with(const std::string& from, const std::string& to) {
  std::string s = tiny_spec("t");
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// A stored tiny sweep to emit and report from.
void tune_tiny(const TempDir& dir) {
  dir.write("tiny.yaml", tiny_spec("tiny", "[1]", "[256]", "[0, 1]", "[64]", 2));
  const auto r = run_mactune(dir, {"tune", "tiny.yaml", "-q", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
}

// ---- mactune tune: the spec file itself.

TEST(TuneBadInput, DevZeroAsTheSpecIsRefusedWithoutReading) {
  TempDir dir;
  CliOptions o;
  o.timeout_s = 20;
  expect_refused(run_mactune(dir, {"tune", "/dev/zero", "--dry-run"}, o),
                 {"/dev/zero", "a character device, not a regular file"});
}

TEST(TuneBadInput, DevUrandomAsTheSpecIsRefusedWithoutReading) {
  TempDir dir;
  CliOptions o;
  o.timeout_s = 20;
  expect_refused(run_mactune(dir, {"tune", "/dev/urandom", "--dry-run"}, o),
                 {"/dev/urandom", "not a regular file"});
}

TEST(TuneBadInput, FifoAsTheSpecIsRefusedWithoutOpeningIt) {
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.file("spec.yaml").c_str(), 0644), 0);
  CliOptions o;
  o.timeout_s = 20;  // an open() of the FIFO would block until killed here: rc -1
  expect_refused(run_mactune(dir, {"tune", "spec.yaml", "--dry-run"}, o),
                 {"spec.yaml", "a FIFO, not a regular file"});
}

TEST(TuneBadInput, DirectoryAsTheSpecSaysItIsADirectory) {
  TempDir dir;
  fs::create_directory(dir.file("specs"));
  expect_refused(run_mactune(dir, {"tune", "specs", "--dry-run"}),
                 {"specs: cannot read the spec: it is a directory"});
}

TEST(TuneBadInput, SpecOverTheSizeCapIsRefused) {
  TempDir dir;
  dir.write("big.yaml", tiny_spec("big") + "# " + std::string(2 << 20, 'x') + "\n");
  expect_refused(run_mactune(dir, {"tune", "big.yaml", "--dry-run"}),
                 {"big.yaml: the spec is larger than 1 MiB"});
}

TEST(TuneBadInput, MissingSpecNamesTheFile) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"tune", "nope.yaml", "--dry-run"}),
                 {"nope.yaml: cannot read the spec: no such file or directory"});
}

// ---- mactune tune: what the spec says.

TEST(TuneBadInput, UnknownBackendNamesFileAndLine) {
  TempDir dir;
  dir.write("t.yaml", spec_with("device: {backend: cpu}", "device: {backend: tpu}"));
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                 {"t.yaml:2: device.backend: expected cpu, cuda or auto, got 'tpu'"});
}

TEST(TuneBadInput, CudaBackendWithoutAGpuNamesFileAndLine) {
  TempDir dir;
  dir.write("t.yaml", spec_with("device: {backend: cpu}", "device:\n  backend: cuda"));
  const auto r = run_mactune(dir, {"tune", "t.yaml", "-q"});
  if (r.rc == 0) GTEST_SKIP() << "this machine has a usable GPU: the case needs one without";
  expect_refused(r, {"t.yaml:3: device.backend: cuda is asked for, but"});
  EXPECT_FALSE(fs::exists(dir.file("t.db")));
}

TEST(TuneBadInput, OddHeadDimIsReportedAtItsOwnLine) {
  TempDir dir;
  dir.write("t.yaml", spec_with("head_dim: 64", "head_dim: 63"));
  const auto r = run_mactune(dir, {"tune", "t.yaml", "--dry-run"});
  expect_refused(r, {"t.yaml:11: workload.head_dim: head_dim = 63 must be even"});
  EXPECT_EQ(r.err.find("kv_heads"), std::string::npos) << "no kv_heads hint: " << r.err;
}

TEST(TuneBadInput, HeadCountMismatchKeepsTheZipHint) {
  TempDir dir;
  dir.write("t.yaml", spec_with("kv_heads: 2", "kv_heads: 3"));
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                 {"t.yaml:10: workload.kv_heads: kv_heads = 3 does not divide q_heads = 8",
                  "zip the head axes"});
}

TEST(TuneBadInput, Pow2RangePastTheAxisIsReportedAtItsLine) {
  TempDir dir;
  dir.write("t.yaml", spec_with("batch: [1, 2]", "batch: {pow2: [1, 1e18]}"));
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                 {"t.yaml:7: workload.batch.pow2: [1, 1e18] is outside the range of"});
}

TEST(TuneBadInput, OversizedRangeIsReportedAtItsLine) {
  TempDir dir;
  dir.write("t.yaml", spec_with("context: [256, 512]", "context: {range: [256, 1M, 1]}"));
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                 {"t.yaml:8: workload.context.range: the range has", "values (at most 100000)"});
}

TEST(TuneBadInput, DeepNestingIsOneLineNamingTheFile) {
  TempDir dir;
  dir.write("t.yaml",
            "name: x\nworkload: " + std::string(3000, '[') + std::string(3000, ']') + "\n");
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                 {"t.yaml:2: syntax: nested more than 64 levels deep"});
}

TEST(TuneBadInput, DeepBlockSequenceIsOneLineNamingTheFile) {
  TempDir dir;
  std::string deep = "name: x\nconstraints:\n  ";
  for (int i = 0; i < 3000; ++i) deep += "- ";
  dir.write("t.yaml", deep + "r < context\n");
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                 {"t.yaml:3: syntax: nested more than 64 levels deep"});
}

TEST(TuneBadInput, MegabyteKeyIsOneLineNamingTheFileAndLimit) {
  TempDir dir;
  dir.write("t.yaml", "name: x\n" + std::string(1'000'000, 'k') + ": 1\n");
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                 {"t.yaml:2: syntax: a key of 1000000 characters; YAML keys are at most 1024"});
}

TEST(TuneBadInput, ListAsAKeyIsOneLineNotAnInternalError) {
  TempDir dir;
  dir.write("t.yaml", "name: x\nworkload:\n  ? [a, b]\n  : 1\n");
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                 {"t.yaml:3: workload: expected a plain key, got a list"});
}

TEST(TuneBadInput, DivisionAndModuloByZeroAreRefusedTheSameWay) {
  TempDir dir;
  for (const char* op : {"/", "%"}) {
    dir.write("t.yaml", spec_with("constraints: [r < context]",
                                  std::string("constraints: ['K ") + op + " 0 > 1']"));
    expect_refused(run_mactune(dir, {"tune", "t.yaml", "--dry-run"}),
                   {std::string("t.yaml:15: constraints[0]: '") + op +
                    "' by zero at column 3 of 'K " + op + " 0 > 1'"});
  }
}

// ---- mactune tune: outputs.

TEST(TuneBadInput, LongSpecNameSaysTheFileNameIsTooLong) {
  TempDir dir;
  const std::string name(300, 'n');
  std::string spec = tiny_spec(name);
  spec = spec.substr(0, spec.find("output:"));  // default outputs: results/<name>.db
  dir.write("t.yaml", spec);
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "-q"}),
                 {"cannot write database 'results/" + name.substr(0, 20),
                  "file name too long (303 characters; at most 255)"});
  EXPECT_TRUE(temporaries(dir.path()).empty());
}

TEST(TuneBadInput, DispatchPathThatIsADirectoryIsRefusedBeforeMeasuring) {
  TempDir dir;
  dir.write("t.yaml", tiny_spec("t"));
  fs::create_directory(dir.file("out"));
  const auto r = run_mactune(dir, {"tune", "t.yaml", "-q", "-o", "out"});
  expect_refused(r, {"cannot write dispatch table 'out': it is a directory"});
  EXPECT_FALSE(fs::exists(dir.file("t.db"))) << "refused before the sweep";
}

TEST(TuneBadInput, EmptyDbOptionIsAnErrorNotTheSpecsDatabase) {
  TempDir dir;
  dir.write("t.yaml", tiny_spec("t"));
  expect_refused(run_mactune(dir, {"tune", "t.yaml", "--db", ""}), {"--db", "an empty value"});
  EXPECT_FALSE(fs::exists(dir.file("t.db")));
}

// ---- mactune emit.

TEST(EmitBadInput, NanTieToleranceIsRefusedNotACrash) {
  TempDir dir;
  tune_tiny(dir);
  for (const char* v : {"nan", "inf", "-inf", "1e999"})
    expect_refused(
        run_mactune(dir, {"emit", "--db", "tiny.db", "-o", "x.json", "--tie-tolerance", v}),
        {"--tie-tolerance", v});  // NaN: not finite; the rest: out of range
  EXPECT_FALSE(fs::exists(dir.file("x.json")));
}

TEST(EmitBadInput, OutputThatIsADirectorySaysSo) {
  TempDir dir;
  tune_tiny(dir);
  fs::create_directory(dir.file("d"));
  expect_refused(run_mactune(dir, {"emit", "--db", "tiny.db", "-o", "d"}),
                 {"cannot write dispatch table 'd': it is a directory"});
  expect_refused(run_mactune(dir, {"emit", "--db", "tiny.db", "-o", "x.json", "--header", "d"}),
                 {"cannot write dispatch header 'd': it is a directory"});
  EXPECT_TRUE(temporaries(dir.path()).empty());
}

// ---- mactune report.

TEST(ReportBadInput, InfTieToleranceIsRefused) {
  TempDir dir;
  tune_tiny(dir);
  expect_refused(
      run_mactune(dir, {"report", "--db", "tiny.db", "-o", "rep", "--tie-tolerance", "nan"}),
      {"--tie-tolerance", "'nan' is not a finite number"});
  EXPECT_FALSE(fs::exists(dir.file("rep")));
}

TEST(ReportBadInput, ReportFileThatIsADirectoryIsNamed) {
  TempDir dir;
  tune_tiny(dir);
  fs::create_directories(dir.file("rep/report.md"));
  expect_refused(run_mactune(dir, {"report", "--db", "tiny.db", "-o", "rep"}),
                 {"cannot write report file 'rep/report.md': it is a directory"});
  EXPECT_TRUE(temporaries(dir.path()).empty()) << temporaries(dir.path()).front();
}

// ---- mactune compare.

TEST(CompareBadInput, ReportThatIsADirectoryIsNamedAndNothingIsLeft) {
  TempDir dir;
  tune_tiny(dir);
  fs::create_directory(dir.file("d"));
  expect_refused(run_mactune(dir, {"compare", "tiny.db", "tiny.db", "-o", "d"}),
                 {"cannot write comparison report 'd': it is a directory"});
  EXPECT_TRUE(temporaries(dir.path()).empty()) << temporaries(dir.path()).front();
}

// ---- mactune itself: commands, CLI11's errors, help.

TEST(MactuneBadInput, UnknownCommandIsNamed) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"frobnicate"}),
                 {"unknown command 'mactune frobnicate'", "tune"});
}

TEST(MactuneBadInput, UnknownDbCommandIsNamed) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"db", "frob"}), {"unknown command 'mactune db frob'", "merge"});
}

TEST(MactuneBadInput, NoCommandSaysOneIsNeeded) {
  TempDir dir;
  expect_refused(run_mactune(dir, {}), {"'mactune' needs a command: one of", "tune"});
}

TEST(MactuneBadInput, Cli11ErrorsAreOneLineWithThePrefix) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"tune"}), {"spec is required", "see 'mactune tune --help'"});
  expect_refused(run_mactune(dir, {"tune", "x.yaml", "--bogus"}),
                 {"--bogus", "see 'mactune tune --help'"});
  expect_refused(run_mactune(dir, {"emit", "--db", "x.db", "-o", "x.json", "--ties", "never"}),
                 {"--ties", "never"});
}

TEST(MactuneBadInput, IntegerOverflowIsRefusedForEveryIntegerOption) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"replay", "--trace", "t.safetensors", "--K", "99999999999"}),
                 {"--K", "99999999999"});
  expect_refused(run_mactune(dir, {"profile", "--context", "99999999999"}),
                 {"--context", "99999999999"});
}

TEST(MactuneBadInput, EveryHelpMentionsTheExitCodes) {
  TempDir dir;
  for (std::vector<std::string> cmd : {std::vector<std::string>{"--help"},
                                       {"tune", "--help"},
                                       {"emit", "--help"},
                                       {"report", "--help"},
                                       {"replay", "--help"},
                                       {"calibrate", "--help"},
                                       {"profile", "--help"},
                                       {"compare", "--help"},
                                       {"db", "--help"},
                                       {"db", "merge", "--help"}}) {
    const auto r = run_mactune(dir, cmd);
    EXPECT_EQ(r.rc, 0) << cmd.front();
    EXPECT_NE(r.out.find("Exit codes: 0 done; 2 bad input"), std::string::npos)
        << cmd.front() << " " << cmd.back() << ":\n"
        << r.out;
  }
}

// ---- mactune replay and calibrate.

TEST(ReplayBadInput, HeadDimTheEngineCannotRunNamesTheTrace) {
  TempDir dir;
  write_trace(dir, "d200.safetensors", 200);
  expect_refused(run_mactune(dir, {"replay", "--engine", "cpu", "--trace", "d200.safetensors"}),
                 {"d200.safetensors: layer 3: head_dim = 200 is not supported by the CPU engine"});
}

TEST(ReplayBadInput, RingLargerThanMemoryNamesTheOptionAndTheBytes) {
  TempDir dir;
  // 512 query heads x K 1M x (64 x (4 + 4) + 4) bytes: 258 GiB of ring.
  write_trace(dir, "t.safetensors", 64, 2, 512, 128);
  expect_refused(run_mactune(dir, {"replay", "--engine", "ref", "--trace", "t.safetensors", "--K",
                                   "1048576", "--r", "4"}),
                 {"--K 1048576 needs 258.0 GiB of memory", "is available"});
}

TEST(ReplayBadInput, JsonOutputThatIsADirectoryIsRefusedBeforeReplaying) {
  TempDir dir;
  write_trace(dir, "t.safetensors", 64);
  fs::create_directory(dir.file("d"));
  expect_refused(
      run_mactune(dir, {"replay", "--engine", "ref", "--trace", "t.safetensors", "--json", "d"}),
      {"cannot write replay JSON 'd': it is a directory"});
}

// RLIMIT_FSIZE makes every write past 512 bytes fail with EFBIG, as a full disk fails with
// ENOSPC (no database here: SQLite's 32 KiB -shm file would fail first). The JSON of one
// point is about 1 KiB.
TEST(ReplayBadInput, FullDiskKeepsTheOldJsonAndLeavesNoTemporary) {
  TempDir dir;
  write_trace(dir, "t.safetensors", 64);
  dir.write("r.json", "old");
  CliOptions o;
  o.file_size_limit = 512;
  expect_refused(run_mactune(dir,
                             {"replay", "--engine", "ref", "--trace", "t.safetensors", "--json",
                              "r.json", "--K", "8", "--r", "4"},
                             o),
                 {"cannot write replay JSON 'r.json': file too large"});
  EXPECT_EQ(testing::read_file(dir.file("r.json")), "old");
  EXPECT_TRUE(temporaries(dir.path()).empty()) << temporaries(dir.path()).front();
}

TEST(CalibrateBadInput, FullDiskKeepsTheOldScheduleAndLeavesNoTemporary) {
  TempDir dir;
  write_trace(dir, "t.safetensors", 64);
  dir.write("s.yaml", "old");
  CliOptions o;
  o.file_size_limit = 512;  // the schedule of one layer is about 750 bytes
  expect_refused(run_mactune(dir,
                             {"calibrate", "--engine", "ref", "--trace", "t.safetensors", "-o",
                              "s.yaml", "--max-err", "0.5", "--K", "8", "--r", "4"},
                             o),
                 {"cannot write schedule 's.yaml': file too large"});
  EXPECT_EQ(testing::read_file(dir.file("s.yaml")), "old");
  EXPECT_TRUE(temporaries(dir.path()).empty()) << temporaries(dir.path()).front();
}

TEST(CalibrateBadInput, NanMaxErrSaysTheValueIsNotFinite) {
  TempDir dir;
  write_trace(dir, "t.safetensors", 64);
  expect_refused(run_mactune(dir, {"calibrate", "--trace", "t.safetensors", "-o", "s.yaml",
                                   "--max-err", "nan"}),
                 {"--max-err", "'nan' is not a finite number"});
}

TEST(CalibrateBadInput, NegativeMaxErrSaysItCannotBeNegative) {
  TempDir dir;
  write_trace(dir, "t.safetensors", 64);
  expect_refused(run_mactune(dir, {"calibrate", "--trace", "t.safetensors", "-o", "s.yaml",
                                   "--max-err", "-1"}),
                 {"--max-err -1: an error budget cannot be negative"});
}

TEST(CalibrateBadInput, OutputThatIsADirectoryLeavesNoTemporary) {
  TempDir dir;
  write_trace(dir, "t.safetensors", 64);
  fs::create_directory(dir.file("d"));
  expect_refused(run_mactune(dir, {"calibrate", "--trace", "t.safetensors", "-o", "d", "--max-err",
                                   "0.01", "--engine", "ref"}),
                 {"cannot write schedule 'd': it is a directory"});
  EXPECT_TRUE(temporaries(dir.path()).empty()) << temporaries(dir.path()).front();
  EXPECT_FALSE(fs::exists(dir.file("d.tmp")));
}

// ---- mactune profile.

TEST(ProfileBadInput, BatchLargerThanMemoryNamesTheOptionAndTheBytes) {
  TempDir dir;
  expect_refused(
      run_mactune(dir, {"profile", "--batch", "4096", "--context", "1048576", "--steps", "1"}),
      {"--batch 4096 with --context 1048576 needs", "TiB of memory", "is available"});
}

TEST(ProfileBadInput, TraceOutputThatIsADirectoryIsRefused) {
  TempDir dir;
  fs::create_directory(dir.file("d"));
  expect_refused(run_mactune(dir, {"profile", "--steps", "1", "--trace", "d"}),
                 {"cannot write trace 'd': it is a directory"});
}

}  // namespace
}  // namespace mactune::tuner
