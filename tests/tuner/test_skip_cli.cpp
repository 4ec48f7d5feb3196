// The skip-ratio axis through the real binary: spec errors, unreachable points left out with
// their reasons, every measured step exact to the token, and the report's skip section.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "cli_util.h"
#include "db/store.h"
#include "kernels/forced.h"
#include "tuner/spec/skip_ratio.h"

namespace mactune::tuner {
namespace {

using testing::run_mactune;
using testing::TempDir;

std::string skip_spec(const std::string& name, const std::string& skips,
                      const std::string& extra = "") {
  return "name: " + name +
         "\ndevice: {backend: cpu}\n"
         "kernels:\n  cpu: {chunk_tokens: 128, threads: 1}\n"
         "mac: {K: 64, r: 8}\n"
         "workload:\n  batch: [1, 2]\n  context: [512, 2048]\n"
         "  q_heads: 8\n  kv_heads: 2\n  head_dim: 64\n  dtype: bf16\n"
         "  skip_ratio: " +
         skips + "\n" + extra +
         "measure: {warmup: 1, min_samples: 3, max_samples: 3, noise: 0.5, time_cap: 1, mode: "
         "hot}\n"
         "decide: {break_even: grid}\n"
         "output: {db: " +
         name + ".db, dispatch: " + name + ".json, report: rep-" + name + "}\n";
}

TEST(SkipCli, SpecErrorsAreOneLineWithExit2) {
  TempDir dir;
  struct Bad {
    std::string name, text, prefix;
  };
  const std::vector<Bad> cases = {
      {"with_hit", skip_spec("with_hit", "[0.9]", "  hit_rate: [0.5]\n"),
       "mactune: error: with_hit.yaml:14: workload.hit_rate: cannot be set together with "
       "workload.skip_ratio (line 13)"},
      {"per_head", skip_spec("per_head", "[0.9]", "  coherence: per-head\n"),
       "mactune: error: per_head.yaml:14: workload.coherence: per-head cannot be swept with "
       "workload.skip_ratio"},
      {"with_lag", skip_spec("with_lag", "[0.9]", "  lag: fixed(4)\n"),
       "mactune: error: with_lag.yaml:14: workload.lag: cannot be set together with"},
      {"range", skip_spec("range", "[0.5, 1.5]"),
       "mactune: error: range.yaml:13: workload.skip_ratio: value 1.5 is out of range (skip_ratio "
       "must "
       "be in [0, 1])"},
      {"nothing", skip_spec("nothing", "[1]"),
       "mactune: error: nothing.yaml:13: workload.skip_ratio: no point of the grid can reach"},
  };
  for (const auto& c : cases) {
    dir.write(c.name + ".yaml", c.text);
    const auto r = run_mactune(dir, {"tune", c.name + ".yaml"});
    EXPECT_EQ(r.rc, 2) << c.name << ": " << r.err;
    EXPECT_EQ(r.err_lines(), 1) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.rfind(c.prefix, 0), 0u) << c.name << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file(c.name + ".db"))) << c.name;
  }
}

// 2 batches x 2 contexts x 3 ratios: at 512, 0.99 would have each of the 2 groups read ~5
// tokens, under r + 1 = 9 (reachable with r <= 4); at 2048, 0.9 needs lags ~197 > K = 64. The
// other 8 points are measured, each step skipping exactly round(s x total).
TEST(SkipCli, UnreachablePointsAreLeftOutWithTheirReasonAndTheRestAreExact) {
  TempDir dir;
  dir.write("sk.yaml", skip_spec("sk", "[0, 0.9, 0.99]"));
  auto dry = run_mactune(dir, {"tune", "sk.yaml", "--dry-run", "-q"});
  ASSERT_EQ(dry.rc, 0) << dry.err;
  EXPECT_NE(dry.out.find("8 points, 0 stored, 8 to measure, 4 unreachable"), std::string::npos)
      << dry.out;
  const auto r = run_mactune(dir, {"tune", "sk.yaml"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string all = r.out + r.err;
  int unreachable = 0;
  for (std::size_t at = all.find("skipped, unreachable:"); at != std::string::npos;
       at = all.find("skipped, unreachable:", at + 1))
    ++unreachable;
  EXPECT_EQ(unreachable, 4) << all;
  EXPECT_NE(all.find("skip_ratio 0.9 at hd64_q8_kv2_bf16_p16_b1_c2048 (K 64, r 8): each hit group "
                     "would read about 205 tokens, more than r + K = 8 + 64; reachable with K "
                     ">= 197"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("skip_ratio 0.99 at hd64_q8_kv2_bf16_p16_b2_c512 (K 64, r 8): the hit "
                     "groups would have to read fewer than r + 1 = 9 tokens each"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("reachable with band r <= 4"), std::string::npos) << all;
  EXPECT_NE(all.find("tuned 8 points"), std::string::npos) << r.out;

  // Every stored step read exactly total - round(s x total) tokens.
  const db::Store s = db::Store::open(dir.file("sk.db"), {.mode = db::OpenMode::read_only});
  std::set<std::pair<long long, double>> seen;
  for (const auto& d : s.devices()) {
    db::MeasurementFilter f;
    f.device_id = d.id;
    for (const auto& row : s.measurements(f)) {
      if (row.instance.family == Family::full) continue;
      const ForcedHits& w = row.workload.forced;
      EXPECT_EQ(w.quota, ForcedQuota::skip_ratio);
      ASSERT_TRUE(row.m.kv_tokens_read && row.m.kv_tokens_total) << row.m.notes;
      EXPECT_EQ(row.m.notes.find("kv_tokens="), std::string::npos) << row.m.notes;
      const long long read = *row.m.kv_tokens_read, total = *row.m.kv_tokens_total;
      EXPECT_EQ(total - read, forced_skip_round(w.skip_ratio, total)) << row.m.notes;
      EXPECT_EQ(total, row.workload.problem.batch * 2LL * (row.workload.context + 1));
      seen.insert({row.workload.context, w.skip_ratio});
    }
  }
  EXPECT_EQ(seen, (std::set<std::pair<long long, double>>{
                      {512, 0}, {512, 0.9}, {2048, 0}, {2048, 0.99}}));

  // The report: the skip chart, the table with the measured ratio beside the target, and the
  // unreachable list; no hit-rate charts (there is no hit-rate curve).
  const std::string md = testing::read_file(dir.file("rep-sk/report.md"));
  EXPECT_NE(md.find("### Speedup at forced KV skip ratios"), std::string::npos) << md;
  // 512 tokens, batch 1: 2 x 513 = 1026 tokens, 923 skipped at 0.9: measured 0.899610.
  EXPECT_NE(md.find("| 512 | 1 | 0.9 | 0.899610 |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Unreachable skip ratios (not measured)"), std::string::npos) << md;
  EXPECT_TRUE(std::filesystem::exists(dir.file("rep-sk/skip_hd64_q8_kv2_bf16_p16.svg")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("rep-sk/speedup_hd64_q8_kv2_bf16_p16.svg")));
  const std::string svg = testing::read_file(dir.file("rep-sk/skip_hd64_q8_kv2_bf16_p16.svg"));
  for (const char* label : {"skip 0", "skip 0.9", "skip 0.99"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
}

}  // namespace
}  // namespace mactune::tuner
