#include <gtest/gtest.h>

#include <sstream>

#include "tuner/decide/decide.h"

namespace mactune::tuner {
namespace {

// Timings centred on `median` seconds with a relative half-IQR of `spread`.
TimeStats timing(double median, double spread = 0.01) {
  TimeStats s;
  s.samples = 10;
  s.median_s = median;
  s.q1_s = median * (1 - spread);
  s.q3_s = median * (1 + spread);
  s.min_s = s.q1_s * 0.99;
  return s;
}

const Bucket kBucket{{128, 32, 8, DType::bf16, 16}, 4, 16384};

// "threads=2,chunk=512" as launch parameters (integers: all these tests use).
Launch launch(const std::string& text) {
  Launch out;
  std::istringstream in(text);
  std::string kv;
  while (std::getline(in, kv, ',')) {
    const auto eq = kv.find('=');
    out.emplace_back(kv.substr(0, eq), std::int64_t{std::stoll(kv.substr(eq + 1))});
  }
  return out;
}

MacParams ring(int K) {
  MacParams m;
  m.ring_capacity = K;
  m.band = 256;
  return m;
}

PairRow pair(double hit, const std::string& params, int K, double mac_s, double full_s,
             double spread = 0.01) {
  PairRow r;
  r.bucket = kBucket;
  r.hit_rate = hit;
  r.variant = "lag=uniform(1,64),coherence=per-head";
  r.mac_config = {"mac_cpu_avx2_hd128_bf16", launch(params), ring(K)};
  r.full_config = {"full_cpu_avx2_hd128_bf16", launch(params), std::nullopt};
  r.mac = timing(mac_s, spread);
  r.full = timing(full_s, spread);
  return r;
}

std::string params(const Choice& c) {
  return launch_text(c.config.launch);
}
int K(const Choice& c) {
  return c.config.mac ? c.config.mac->ring_capacity : 0;
}

TEST(TunerDecide, BreakEvenIsTheStartOfTheWinningSuffix) {
  // Slower at 0, too close at 0.5, faster from 0.9 up.
  const BreakEven be = break_even_of({{1.0, 8, Verdict::faster},
                                      {0.0, 0.9, Verdict::slower},
                                      {0.9, 3, Verdict::faster},
                                      {0.5, 1.0, Verdict::tie}});
  EXPECT_EQ(be.status, BreakEvenStatus::ok);
  ASSERT_TRUE(be.hit_rate);
  EXPECT_DOUBLE_EQ(*be.hit_rate, 0.9);
  ASSERT_EQ(be.curve.size(), 4u);
  EXPECT_DOUBLE_EQ(be.curve[0].hit_rate, 0.0);
  // The sides tie at 0.5: MAC may pay off there already, so the bracket includes it.
  EXPECT_DOUBLE_EQ(be.lo.value_or(-1), 0.5);
  EXPECT_TRUE(be.lo_closed);
  EXPECT_EQ(bracket_text(be), "[0.5, 0.9]");
}

TEST(TunerDecide, BracketIsOpenWhereMacIsClearlySlower) {
  const BreakEven slower = break_even_of(
      {{0.0, 0.9, Verdict::slower}, {0.5, 0.95, Verdict::slower}, {0.9, 3, Verdict::faster}});
  EXPECT_FALSE(slower.lo_closed);
  EXPECT_EQ(bracket_text(slower), "(0.5, 0.9]");
  const BreakEven from_zero = break_even_of({{0.0, 1.2, Verdict::faster}, {1, 9, Verdict::faster}});
  EXPECT_EQ(bracket_text(from_zero), "[0, 0]");
  EXPECT_EQ(bracket_text(break_even_of({{0.0, 0.5, Verdict::slower}})), "") << "never";
}

TEST(TunerDecide, NonMonotoneWinsCountOnlyFromTheTop) {
  const BreakEven be = break_even_of(
      {{0.5, 1.2, Verdict::faster}, {0.9, 1.0, Verdict::tie}, {1.0, 5, Verdict::faster}});
  EXPECT_EQ(be.status, BreakEvenStatus::ok);
  EXPECT_DOUBLE_EQ(*be.hit_rate, 1.0);
}

TEST(TunerDecide, AmbiguousWhenTheTopIsTooCloseToCall) {
  const BreakEven be = break_even_of({{0.0, 0.9, Verdict::slower}, {1.0, 1.0, Verdict::tie}});
  EXPECT_EQ(be.status, BreakEvenStatus::ambiguous);
  EXPECT_FALSE(be.hit_rate);
}

TEST(TunerDecide, NeverWhenMacIsSlowerEverywhere) {
  const BreakEven be = break_even_of({{0.0, 0.5, Verdict::slower}, {1.0, 0.8, Verdict::slower}});
  EXPECT_EQ(be.status, BreakEvenStatus::never);
  EXPECT_FALSE(be.hit_rate);
}

TEST(TunerDecide, IntervalsDecideTheVerdicts) {
  // Full takes 10 ms at every hit rate; MAC 12 ms at 0 (clearly slower), 10.05 ms at 0.5
  // (IQRs overlap), 6 ms at 0.9 and 2 ms at 1 (clearly faster).
  std::vector<PairRow> rows = {
      pair(0, "threads=0", 512, 12e-3, 10e-3), pair(0.5, "threads=0", 512, 10.05e-3, 10e-3),
      pair(0.9, "threads=0", 512, 6e-3, 10e-3), pair(1, "threads=0", 512, 2e-3, 10e-3)};
  const auto d = decide(rows, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].break_even.status, BreakEvenStatus::ok);
  EXPECT_DOUBLE_EQ(*d[0].break_even.hit_rate, 0.9);
  const auto& c = d[0].break_even.curve;
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].verdict, Verdict::slower);
  EXPECT_EQ(c[1].verdict, Verdict::tie);
  EXPECT_NEAR(c[3].speedup, 5.0, 1e-12);
  EXPECT_EQ(d[0].mac.reason, "only");
}

TEST(TunerDecide, WideIntervalsMakeItAmbiguous) {
  std::vector<PairRow> rows = {pair(0, "t=0", 512, 12e-3, 10e-3, 0.3),
                               pair(1, "t=0", 512, 8e-3, 10e-3, 0.3)};
  EXPECT_EQ(decide(rows, {})[0].break_even.status, BreakEvenStatus::ambiguous);
}

TEST(TunerDecide, FastestConfigWinsOutsideTheTolerance) {
  std::vector<PairRow> rows;
  for (double h : {0.0, 1.0}) {
    rows.push_back(pair(h, "threads=1", 512, h ? 4e-3 : 20e-3, 20e-3));
    rows.push_back(pair(h, "threads=2", 512, h ? 2e-3 : 10e-3, 10e-3));
  }
  const auto d = decide(rows, {});
  EXPECT_EQ(params(d[0].mac), "threads=2");
  EXPECT_EQ(d[0].mac.reason, "fastest");
  EXPECT_NEAR(d[0].mac.margin, 1.0, 1e-9);  // the other is 2x slower
  EXPECT_EQ(params(d[0].full), "threads=2");
  EXPECT_DOUBLE_EQ(d[0].full.score, 10e-3);
  EXPECT_EQ(d[0].mac.ties.size(), 1u);
}

// The quick spec's b1 16K bucket on this host: full attention at chunk_tokens 256 was 48%
// slower than at 1024, MAC at 256 the fastest MAC config. Below the break-even the table runs
// the chosen full config (1024), so MAC must beat that one, not its own pair's 256 baseline
// (against which MAC "won" at hit rate 0, and the table used MAC where it was 11% slower).
TEST(TunerDecide, BreakEvenIsAgainstTheChosenFullConfigNotThePairsOwnBaseline) {
  std::vector<PairRow> rows;
  for (double h : {0.0, 0.5, 1.0}) {
    rows.push_back(pair(h, "chunk=256", 512, h == 1 ? 0.515e-3 : h ? 3.39e-3 : 2.89e-3, 3.85e-3));
    rows.push_back(pair(h, "chunk=1024", 512, h == 1 ? 0.54e-3 : h ? 3.45e-3 : 2.95e-3, 2.60e-3));
  }
  const auto d = decide(rows, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(params(d[0].mac), "chunk=256");
  EXPECT_EQ(params(d[0].full), "chunk=1024");
  ASSERT_TRUE(d[0].break_even.hit_rate);
  EXPECT_DOUBLE_EQ(*d[0].break_even.hit_rate, 1.0);
  ASSERT_EQ(d[0].break_even.curve.size(), 3u);
  EXPECT_EQ(d[0].break_even.curve[0].verdict, Verdict::slower);
  EXPECT_NEAR(d[0].break_even.curve[0].speedup, 2.60 / 2.89, 1e-9);
  EXPECT_NEAR(d[0].break_even.curve[2].speedup, 2.60 / 0.515, 1e-9);
}

TEST(TunerDecide, TiesGoToTheSimplerConfig) {
  // K = 1024 is 0.5% faster than K = 512: within the 1% tolerance, so the smaller ring wins.
  std::vector<PairRow> rows = {pair(1, "threads=0", 512, 2.010e-3, 10e-3),
                               pair(1, "threads=0", 1024, 2.000e-3, 10e-3)};
  auto d = decide(rows, {});
  EXPECT_EQ(K(d[0].mac), 512);
  EXPECT_EQ(d[0].mac.reason, "simpler");
  EXPECT_EQ(d[0].mac.ties.size(), 2u);
  ASSERT_EQ(d[0].mac.tie_scores.size(), 2u);  // stored with the tie set: the chosen one first
  EXPECT_DOUBLE_EQ(d[0].mac.tie_scores[0], d[0].mac.score);
  EXPECT_NEAR(d[0].mac.tie_scores[0], 1.005, 1e-9);
  EXPECT_DOUBLE_EQ(d[0].mac.tie_scores[1], 1.0);
  // With a zero tolerance and no interval rule the faster one wins.
  DecideOptions strict;
  strict.tie_tolerance = 0;
  strict.ties = TieRule::tolerance;
  d = decide(rows, strict);
  EXPECT_EQ(K(d[0].mac), 1024);
  EXPECT_EQ(d[0].mac.reason, "fastest");
}

TEST(TunerDecide, DifferencesInsideTheIntervalsAreTiesUnderTheOverlapRule) {
  // chunk=1024 is 4% faster than chunk=256, but both IQRs are +-5%: the measurement cannot
  // tell them apart. Overlap (the default): tied, the simpler (smaller) chunk wins. Tolerance
  // only: the faster one wins.
  std::vector<PairRow> rows = {pair(0, "chunk=256", 512, 10.0e-3, 10.0e-3, 0.05),
                               pair(0, "chunk=1024", 512, 9.6e-3, 9.6e-3, 0.05),
                               pair(1, "chunk=256", 512, 2.0e-3, 10.0e-3, 0.05),
                               pair(1, "chunk=1024", 512, 1.92e-3, 9.6e-3, 0.05)};
  auto d = decide(rows, {});
  EXPECT_EQ(params(d[0].mac), "chunk=256");
  EXPECT_EQ(d[0].mac.reason, "simpler");
  EXPECT_EQ(d[0].mac.ties.size(), 2u);
  ASSERT_EQ(d[0].mac.tie_scores.size(), 2u);  // stored with the tie set: the chosen one first
  EXPECT_DOUBLE_EQ(d[0].mac.tie_scores[0], d[0].mac.score);
  EXPECT_NEAR(d[0].mac.tie_scores[0], 1.0 / 0.96, 1e-9);
  EXPECT_DOUBLE_EQ(d[0].mac.tie_scores[1], 1.0);
  EXPECT_NEAR(d[0].mac.score, 1.0 / 0.96, 1e-9) << "the raw score is kept";
  EXPECT_EQ(params(d[0].full), "chunk=256");
  DecideOptions tol;
  tol.ties = TieRule::tolerance;
  d = decide(rows, tol);
  EXPECT_EQ(params(d[0].mac), "chunk=1024");
  EXPECT_EQ(params(d[0].full), "chunk=1024");
  // Tight intervals (+-0.5%) resolve the 4%: the faster one wins under either rule.
  for (auto& r : rows) {
    r.mac.q1_s = r.mac.median_s * 0.995, r.mac.q3_s = r.mac.median_s * 1.005;
    r.full.q1_s = r.full.median_s * 0.995, r.full.q3_s = r.full.median_s * 1.005;
  }
  d = decide(rows, {});
  EXPECT_EQ(params(d[0].mac), "chunk=1024");
  EXPECT_EQ(d[0].mac.reason, "fastest");
  EXPECT_NEAR(d[0].mac.margin, 0.04 / 0.96, 1e-9);
}

TEST(TunerDecide, TiesGoToTheIncumbentFirst) {
  std::vector<PairRow> rows = {pair(1, "threads=0", 512, 2.010e-3, 10e-3),
                               pair(1, "threads=0", 1024, 2.000e-3, 10e-3),
                               pair(1, "threads=0", 2048, 2.015e-3, 10e-3)};
  DecideOptions opt;
  opt.incumbents[kBucket.key() + "/mac"] = {"mac_cpu_avx2_hd128_bf16", launch("threads=0"),
                                            ring(2048)};
  const auto d = decide(rows, opt);
  EXPECT_EQ(K(d[0].mac), 2048);
  EXPECT_EQ(d[0].mac.reason, "incumbent");
  // An incumbent outside the tolerance does not win.
  rows[2].mac = timing(2.5e-3);
  EXPECT_EQ(K(decide(rows, opt)[0].mac), 512);
}

TEST(TunerDecide, SimplicityPrefersAutoThenSmallerLaunchParameters) {
  std::vector<PairRow> rows = {pair(1, "threads=2,chunk=512", 512, 2.0e-3, 10e-3),
                               pair(1, "threads=1,chunk=512", 512, 2.001e-3, 10e-3),
                               pair(1, "threads=0,chunk=512", 512, 2.002e-3, 10e-3)};
  EXPECT_EQ(params(decide(rows, {})[0].mac), "threads=0,chunk=512");
  rows.pop_back();
  EXPECT_EQ(params(decide(rows, {})[0].mac), "threads=1,chunk=512");
}

TEST(TunerDecide, MostConservativeVariantSetsTheBucketBreakEven) {
  std::vector<PairRow> rows = {pair(0.5, "t=0", 512, 5e-3, 10e-3),
                               pair(1, "t=0", 512, 2e-3, 10e-3)};
  PairRow a = pair(0.5, "t=0", 512, 12e-3, 10e-3), b = pair(1, "t=0", 512, 2e-3, 10e-3);
  a.variant = b.variant = "lag=uniform(1,512),coherence=per-head";
  rows.push_back(a);
  rows.push_back(b);
  const auto d = decide(rows, {});
  ASSERT_EQ(d[0].by_variant.size(), 2u);
  EXPECT_DOUBLE_EQ(*d[0].break_even.hit_rate, 1.0);
  // A variant where MAC never wins makes the bucket "never".
  for (auto& r : rows)
    if (r.variant == a.variant) r.mac = timing(30e-3);
  EXPECT_EQ(decide(rows, {})[0].break_even.status, BreakEvenStatus::never);
}

}  // namespace
}  // namespace mactune::tuner

namespace mactune::tuner {
namespace {

// Sides a search dropped after brief samples (partial) are no candidates: a partial MAC side
// that looks fastest is not chosen and draws no curve point; a partial full side is no full
// candidate. Every complete candidate comes back scored.
TEST(TunerDecide, PartialSidesAreNoCandidates) {
  std::vector<PairRow> rows;
  for (double hit : {0.0, 1.0}) {
    PairRow fast = pair(hit, "chunk=64", 512, 0.5e-3, 1.0e-3);  // brief samples, dropped
    fast.mac_partial = true;
    fast.full_partial = true;
    fast.full = timing(0.2e-3);  // the fastest baseline, but partial
    rows.push_back(fast);
    rows.push_back(pair(hit, "chunk=128", 512, 0.8e-3, 1.0e-3));
    rows.push_back(pair(hit, "chunk=256", 512, 0.9e-3, 1.1e-3));
  }
  const auto d = decide(rows, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(launch_text(d[0].mac.config.launch), "chunk=128");
  EXPECT_EQ(launch_text(d[0].full.config.launch), "chunk=128");
  EXPECT_EQ(d[0].mac_candidates.size(), 2u);
  EXPECT_EQ(d[0].full_candidates.size(), 2u);
  for (const Choice& c : d[0].mac_candidates) EXPECT_NE(launch_text(c.config.launch), "chunk=64");
  for (const auto& [variant, be] : d[0].by_variant)
    for (const CurvePoint& p : be.curve) EXPECT_NEAR(p.speedup, 1.0 / 0.8, 1e-9);
  // The same rows with nothing partial: the fast config wins.
  for (PairRow& r : rows) r.mac_partial = r.full_partial = false;
  const auto all = decide(rows, {});
  EXPECT_EQ(launch_text(all[0].mac.config.launch), "chunk=64");
  EXPECT_EQ(launch_text(all[0].full.config.launch), "chunk=64");
  EXPECT_EQ(all[0].mac_candidates.size(), 3u);
}

}  // namespace
}  // namespace mactune::tuner
