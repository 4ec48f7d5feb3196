// The skip-ratio axis in the tuner: the shipped spec, unreachable points and the K or r their
// reason names, the decisions (skip rows make a skip curve, never a hit-rate break-even) and
// the report's chart.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "kernels/error.h"
#include "tuner/decide/decide.h"
#include "tuner/report/report_skip.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/skip_ratio.h"

namespace mactune::tuner {
namespace {

TEST(SkipRatio, ShippedSpecReachesEveryPoint) {
  const char* src = std::getenv("MACTUNE_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "MACTUNE_SOURCE_DIR is set by ctest";
  const Spec spec = load_spec(std::string(src) + "/configs/cpu-skip.yaml", Backend::cpu);
  std::vector<std::string> unreachable;
  const auto pts = expand_grid(spec, &unreachable);
  EXPECT_TRUE(unreachable.empty()) << unreachable.front();
  EXPECT_EQ(pts.size(), 4u * 5u);  // batch x skip ratio
  for (const TunePoint& p : pts) {
    EXPECT_EQ(p.forced.quota, ForcedQuota::skip_ratio);
    EXPECT_EQ(p.forced.coherence, Coherence::per_group);
    EXPECT_EQ(p.context, 16384);
  }
}

TunePoint point(int batch, int context, int kv_heads, int K, int r, double s) {
  TunePoint p;
  p.shape.batch = batch;
  p.shape.kv_heads = kv_heads;
  p.shape.q_heads = 4 * kv_heads;
  p.context = context;
  p.mac.ring_capacity = K;
  p.mac.band = r;
  p.mac.min_context = 0;
  p.forced.enabled = true;
  p.forced.quota = ForcedQuota::skip_ratio;
  p.forced.skip_ratio = s;
  p.forced.coherence = Coherence::per_group;
  return p;
}

// "... reachable with K >= X": K = X reaches it and K = X - 1 does not; "... band r <= Y": r = Y
// reaches it and r = Y + 1 does not. Random shapes and ratios.
TEST(SkipRatio, UnreachableReasonsNameTheSmallestKOrLargestBandThatReaches) {
  std::mt19937_64 rng(3);
  int by_k = 0, by_band = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int context = 64 + static_cast<int>(rng() % 4000);
    const int r = static_cast<int>(rng() % 64);
    const int K = 1 + static_cast<int>(rng() % 512);
    const double s = std::uniform_real_distribution<double>(0.01, 0.999)(rng);
    const int batch = 1 + static_cast<int>(rng() % 4);
    const int kv = 1 + static_cast<int>(rng() % 8);
    TunePoint p = point(batch, context, kv, K, r, s);
    const std::string why = skip_unreachable(p);
    if (why.empty()) continue;
    SCOPED_TRACE(why);
    if (const auto at = why.find("reachable with K >= "); at != std::string::npos) {
      ++by_k;
      const int need = std::stoi(why.substr(at + 20));
      EXPECT_GT(need, K);
      p.mac.ring_capacity = need;
      EXPECT_EQ(skip_unreachable(p), "");
      p.mac.ring_capacity = need - 1;
      EXPECT_NE(skip_unreachable(p), "");
    } else if (const auto b = why.find("reachable with band r <= "); b != std::string::npos) {
      ++by_band;
      const int most = std::stoi(why.substr(b + 25));
      EXPECT_LT(most, r);
      p.mac.band = most;
      p.mac.ring_capacity = context;  // enough ring for any lag
      EXPECT_EQ(skip_unreachable(p), "");
      p.mac.band = most + 1;
      EXPECT_NE(skip_unreachable(p), "");
    } else {
      EXPECT_NE(why.find("no band reaches it"), std::string::npos);
    }
  }
  EXPECT_GT(by_k, 100);
  EXPECT_GT(by_band, 100);
  // The acceptance gate could turn a forced hit back into a miss: never exact.
  TunePoint gated = point(1, 4096, 8, 4096, 64, 0.5);
  EXPECT_EQ(skip_unreachable(gated), "");
  gated.mac.accept_eps = 0.1;
  EXPECT_NE(skip_unreachable(gated).find("accept_eps"), std::string::npos);
}

TimeStats timing(double median) {
  TimeStats t;
  t.samples = 10;
  t.median_s = median;
  t.q1_s = median * 0.99;
  t.q3_s = median * 1.01;
  return t;
}

PairRow skip_row(double s, double mac_s, double full_s) {
  PairRow r;
  r.bucket = Bucket{{128, 32, 8, DType::bf16, 16}, 2, 16384};
  r.hit_rate = 0;
  r.variant =
      "lag=uniform(1,64),coherence=per-group,quota=skip-ratio,skip_ratio=" + format_number(s);
  r.skip_ratio = s;
  r.measured_skip = s - 1e-6;
  r.mac_config = {"mac_cpu_avx512_hd128_bf16", {}, MacParams{}};
  r.full_config = {"full_cpu_avx512_hd128_bf16", {}, std::nullopt};
  r.mac = timing(mac_s);
  r.full = timing(full_s);
  return r;
}

TEST(SkipRatio, SkipRowsMakeTheSkipCurveNotTheHitRateBreakEven) {
  // MAC slower at 0, a tie at 0.8, faster from 0.9 on.
  const std::vector<PairRow> rows = {skip_row(0.95, 2e-3, 8e-3), skip_row(0, 11e-3, 10e-3),
                                     skip_row(0.9, 4e-3, 8e-3), skip_row(0.8, 8e-3, 8e-3),
                                     skip_row(0.99, 1e-3, 8e-3)};
  const auto ds = decide(rows, {});
  ASSERT_EQ(ds.size(), 1u);
  const BucketDecision& d = ds[0];
  EXPECT_TRUE(d.by_variant.empty());
  EXPECT_EQ(d.break_even.status,
            BreakEvenStatus::ambiguous);  // no hit-rate curve: emit never turns MAC on
  EXPECT_FALSE(d.break_even.hit_rate);
  ASSERT_EQ(d.skip_curve.size(), 5u);
  for (std::size_t i = 1; i < d.skip_curve.size(); ++i)
    EXPECT_LT(d.skip_curve[i - 1].skip_ratio, d.skip_curve[i].skip_ratio);
  EXPECT_EQ(d.skip_curve[0].verdict, Verdict::slower);
  EXPECT_EQ(d.skip_curve[1].verdict, Verdict::tie);
  EXPECT_DOUBLE_EQ(d.skip_curve[4].speedup, 8.0);
  EXPECT_EQ(d.skip_break_even.status, BreakEvenStatus::ok);
  EXPECT_DOUBLE_EQ(*d.skip_break_even.hit_rate, 0.9);  // the break-even skip ratio
  EXPECT_DOUBLE_EQ(*d.skip_break_even.lo, 0.8);

  const svg::Chart c = skip_speedup_chart(ds);
  ASSERT_EQ(c.panels.size(), 1u);
  ASSERT_EQ(c.panels[0].series.size(), 5u);
  EXPECT_EQ(c.panels[0].series[2].label, "skip 0.9");
  EXPECT_EQ(c.panels[0].series[2].x, std::vector<double>{2});
  EXPECT_DOUBLE_EQ(c.panels[0].series[2].y.at(0), 2.0);
  const std::string md = skip_markdown(ds, "hd128_q32_kv8_bf16_p16");
  EXPECT_NE(md.find("| 16384 | 2 | 0.9 | 0.899999 | 4.000 ms | 8.000 ms | 2.00x ✓ |"),
            std::string::npos)
      << md;
  // A tie at 0.8: the bracket is closed there, as the hit-rate tables write it (break_even_text).
  EXPECT_NE(md.find("| 16384 | 2 | 0.9 [0.8, 0.9] |"), std::string::npos) << md;
}

}  // namespace
}  // namespace mactune::tuner
