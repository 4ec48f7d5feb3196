// Values through the real binary (issue 30, the value half), grouped per command: what used to
// be silently accepted, hang, crash or print unclear text is now one line "mactune: error: ..."
// naming the option, key or line, exit 2.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "cli_util.h"

namespace mactune::tuner {
namespace {

using testing::CliOptions;
using testing::CliResult;
using testing::expect_refused;
using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

// The 1-based line of `needle` in `text`.
int line_of(const std::string& text, const std::string& needle) {
  const auto at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  int line = 1;
  for (std::size_t i = 0; i < at; ++i) line += text[i] == '\n';
  return line;
}

CliResult dry_run(const TempDir& dir, const std::string& spec) {
  dir.write("t.yaml", spec);
  return run_mactune(dir, {"tune", "t.yaml", "--dry-run", "-q"});
}

// A stored tiny sweep (one point) to predict from.
void tune_tiny(const TempDir& dir) {
  dir.write("tiny.yaml", tiny_spec("tiny", "[1]", "[256]", "[0, 1]", "[64]", 2));
  const auto r = run_mactune(dir, {"tune", "tiny.yaml", "-q", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
}

// ---- mactune tune: the spec's YAML (kernels/yaml_strict.h).

TEST(TuneValues, SecondDocumentIsRefused) {
  TempDir dir;
  const std::string spec = tiny_spec("t") + "---\nname: other\n";
  expect_refused(dry_run(dir, spec),
                 {"t.yaml:" + std::to_string(line_of(spec, "---\nname: other")) + ":",
                  "second YAML document"});
}

TEST(TuneValues, TopLevelKeyGivenTwiceIsRefused) {
  TempDir dir;
  const std::string spec = tiny_spec("t") + "seed: 3\nseed: 4\n";
  expect_refused(dry_run(dir, spec), {"t.yaml:" + std::to_string(line_of(spec, "seed: 4")) +
                                      ": seed: given twice (first at line"});
}

TEST(TuneValues, NestedKeyGivenTwiceIsRefused) {
  TempDir dir;
  const std::string spec = replaced(tiny_spec("t"), "mode: hot,", "mode: hot, mode: cold,");
  expect_refused(dry_run(dir, spec), {"measure.mode: given twice"});
}

TEST(TuneValues, UnterminatedQuoteNamesItsLine) {
  TempDir dir;
  const std::string spec =
      replaced(tiny_spec("t"), "  lag: uniform(1,16)", "  lag: \"uniform(1,16)");
  expect_refused(dry_run(dir, spec), {"t.yaml:" + std::to_string(line_of(spec, "  lag: \"")) + ":",
                                      "does not close on its line"});
}

TEST(TuneValues, NulInAQuotedValueIsNamed) {
  TempDir dir;
  const std::string spec = tiny_spec("t") + "description: \"a\\0b\"\n";
  expect_refused(dry_run(dir, spec), {"NUL character"});
}

TEST(TuneValues, NegativeZeroIsTheSameHitRate) {
  TempDir dir;
  expect_refused(dry_run(dir, replaced(tiny_spec("t"), "hit_rate: [0, 1]", "hit_rate: [0, -0.0]")),
                 {"workload.hit_rate: value 0 is listed twice"});
}

TEST(TuneValues, ContextAtMostTheBandIsRefused) {
  TempDir dir;
  std::string spec = tiny_spec("t", "[1]", "[32, 256]");
  spec = replaced(spec, "constraints: [r < context]\n", "");
  expect_refused(dry_run(dir, spec),
                 {"workload.context: context 32 with r = 32", "no step can hit"});
}

TEST(TuneValues, HitsBelowMinContextAreRefused) {
  TempDir dir;
  const std::string spec =
      replaced(tiny_spec("t"), "mac: {K: 64, r: 32}", "mac: {K: 64, r: 32, min_context: 1024}");
  expect_refused(dry_run(dir, spec), {"mac.min_context: context 256 is below min_context = 1024"});
}

TEST(TuneValues, NameThatIsNotOneFileNameIsRefused) {
  TempDir dir;
  for (const std::string name : {"..", ".", ".hidden"}) {
    SCOPED_TRACE(name);
    expect_refused(dry_run(dir, replaced(tiny_spec("t"), "name: t\n", "name: " + name + "\n")),
                   {"t.yaml:1: name:", "starts with '.'"});
  }
}

TEST(TuneValues, ThreadsAboveTheMachineBoundAreRefused) {
  TempDir dir;
  expect_refused(dry_run(dir, replaced(tiny_spec("t"), "threads: 1", "threads: 1024")),
                 {"kernels.cpu.threads = 1024: at most"});
}

TEST(TuneValues, WarmupStopsAtTheTimeCap) {
  TempDir dir;
  std::string spec = tiny_spec("w", "[1]", "[256]", "[1]", "[64]", 3);
  spec = replaced(spec, "warmup: 1,", "warmup: 1000000,");
  spec = replaced(spec, "time_cap: 1,", "time_cap: 0.2,");
  dir.write("w.yaml", spec);
  CliOptions o;
  o.timeout_s = 60;  // a million warm-up steps take minutes
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_mactune(dir, {"tune", "w.yaml", "-q", "--no-report", "--no-emit"}, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_LT(s, 60);
}

// ---- Every command's flags (cli/options.cpp).

TEST(FlagValues, EmptyNumberIsRefusedAsEmpty) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"replay", "--trace", "x.safetensors", "--tau", ""}),
                 {"--tau", "an empty value"});
  expect_refused(run_mactune(dir, {"replay", "--trace", "x.safetensors", "--K", ""}),
                 {"--K", "an empty value"});
  expect_refused(run_mactune(dir, {"calibrate", "--trace", "x", "-o", "s.yaml", "--max-err", ""}),
                 {"--max-err", "an empty value"});
  expect_refused(run_mactune(dir, {"profile", "--steps", ""}), {"--steps", "an empty value"});
}

TEST(FlagValues, EmptyItemOfAListIsRefused) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"replay", "--trace", "x", "--K", "256,,512"}),
                 {"--K '256,,512'", "an empty value in the list"});
  expect_refused(run_mactune(dir, {"replay", "--trace", "x", "--layers", "1,"}),
                 {"--layers", "an empty value in the list"});
}

TEST(FlagValues, ValueGivenTwiceIsRefused) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"replay", "--trace", "x", "--tau", "0.5,0.50"}),
                 {"--tau", "given twice"});
  expect_refused(run_mactune(dir, {"replay", "--trace", "x", "--K", "256", "--K", "256"}),
                 {"--K", "given twice"});
}

TEST(FlagValues, BoundsAreWrittenReadably) {
  TempDir dir;
  auto short_line = [](const CliResult& r) { EXPECT_LT(r.err.size(), 240u) << r.err; };
  auto r = run_mactune(dir, {"nsys", "summary", "x.sqlite", "--top", "0"});
  expect_refused(r, {"--top", "must be at least 1"});
  short_line(r);
  r = run_mactune(dir, {"slurm", "x.yaml", "--shards", "2", "--max-parallel", "0"});
  expect_refused(r, {"--max-parallel", "must be at least 1"});
  short_line(r);
  r = run_mactune(dir, {"compare", "a.db", "b.db", "--threshold", "2"});
  expect_refused(r, {"--threshold", "must be in [0, 0.99]"});
  short_line(r);
}

TEST(FlagValues, NegativeForAnUnsignedOptionIsRefused) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"profile", "--seed", "-1"}), {"--seed", "negative"});
  expect_refused(run_mactune(dir, {"nsys", "summary", "x.sqlite", "--top", "-1"}), {"--top"});
}

// ---- mactune predict.

TEST(PredictValues, ShapeFlagsAreCheckedWhenGiven) {
  TempDir dir;
  tune_tiny(dir);
  const std::vector<std::string> base = {"predict", "--db", "tiny.db", "--context", "4K"};
  auto with = [&](std::initializer_list<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more);
    return run_mactune(dir, a);
  };
  expect_refused(with({"--batch", "1", "--q-heads", "0"}), {"q_heads = 0"});
  expect_refused(with({"--batch", "1e9"}), {"batch = 1000000000 must be in [1, 65536]"});
  expect_refused(with({"--batch", "1", "--params", "bogus=1"}), {"--params 'bogus=1'", "bogus"});
  expect_refused(with({"--batch", "1", "--params", "chunk_tokens=0"}),
                 {"--params", "chunk_tokens"});
  EXPECT_EQ(with({"--batch", "1", "--params", "threads=1,chunk_tokens=64,block_rows=16"}).rc, 0);
}

// ---- mactune nsys summary.

TEST(NsysValues, WorkloadIsValidated) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"nsys", "summary", "x.sqlite", "--workload", "b=x ctx=4"}),
                 {"--workload", "b=x"});
  expect_refused(run_mactune(dir, {"nsys", "summary", "x.sqlite", "--workload", "batch=4"}),
                 {"--workload", "'batch=4' is not one of"});
  expect_refused(run_mactune(dir, {"nsys", "summary", "x.sqlite", "--workload", "hit=2"}),
                 {"--workload", "hit rate in [0, 1]"});
}

// ---- Memory: the sizes a request implies against what the process may map.

TEST(MemoryValues, AddressSpaceLimitIsOneLine) {
  TempDir dir;
  CliOptions o;
  o.address_space_limit = 600ll << 20;
  const auto r = run_mactune(
      dir, {"profile", "--batch", "64", "--context", "200000", "--steps", "2", "--warmup", "0"}, o);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("memory"), std::string::npos) << r.err;
}

TEST(MemoryValues, ProfileStepsAreCheckedBeforeAllocating) {
  TempDir dir;
  expect_refused(run_mactune(dir, {"profile", "--steps", "1e9"}), {"--steps 1000000000"});
}

}  // namespace
}  // namespace mactune::tuner
