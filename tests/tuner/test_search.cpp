// The break-even search on synthetic step-time functions: it converges to the known crossing
// within the resolution, stops at a tie, never splits a forced quota, and its probes (rows of
// the chosen config only) do not change which config is chosen.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tuner/decide/decide.h"
#include "tuner/search/search.h"

namespace mactune::tuner {
namespace {

// MAC vs full at hit rate h when MAC's time is full x (1 + a - b h) and every measurement's
// interval is +-1%; ties inside +-tie_band of the crossing.
struct Synthetic {
  double crossing = 0.3;
  double tie_band = 0.0;
  CurvePoint at(double h) const {
    CurvePoint p;
    p.hit_rate = h;
    p.speedup = 1.0 / (1.0 + 0.5 * (crossing - h));
    p.verdict = std::abs(h - crossing) <= tie_band ? Verdict::tie
                : h > crossing                     ? Verdict::faster
                                                   : Verdict::slower;
    return p;
  }
};

struct Outcome {
  SearchStatus status;
  int probes = 0;
};

// Runs the search to its end from the grid {0, 0.5, 0.9, 1}.
Outcome run(const Synthetic& f, double resolution, int units) {
  const std::set<double> grid{0, 0.5, 0.9, 1};
  std::vector<CurvePoint> curve;
  for (double h : grid) curve.push_back(f.at(h));
  Outcome o;
  for (;;) {
    o.status = search_status(break_even_of(curve), resolution, units, grid);
    if (o.status.stop != SearchStop::open) return o;
    EXPECT_GT(*o.status.next, o.status.lo);
    EXPECT_LT(*o.status.next, o.status.hi);
    const double k = *o.status.next * units;
    EXPECT_NEAR(k, std::round(k), 1e-9) << "probes are quotas";
    curve.push_back(f.at(*o.status.next));
    if (++o.probes > 20) {
      ADD_FAILURE() << "the search does not end";
      return o;
    }
  }
}

TEST(BreakEvenSearch, ConvergesToTheKnownCrossingWithinTheResolution) {
  for (double crossing : {0.03, 0.3, 0.61, 0.77, 0.95}) {
    const Outcome o = run({crossing, 0.0}, 0.02, 4096);
    EXPECT_EQ(o.status.stop, SearchStop::resolution) << crossing;
    EXPECT_LT(o.status.lo, crossing) << crossing;
    EXPECT_GE(o.status.hi, crossing) << crossing;
    EXPECT_LE(o.status.hi - o.status.lo, 0.02 + 1e-12) << crossing;
    EXPECT_LE(o.probes, 6) << "bisection: log2(0.5 / 0.02) < 5 probes, and one for quotas";
  }
}

TEST(BreakEvenSearch, StopsWhereTheSidesTie) {
  // Ties over [0.25, 0.35]: the first probe, 0.25, ties; the bracket is [0.25, 0.5].
  const Outcome o = run({0.3, 0.05}, 0.02, 4096);
  EXPECT_EQ(o.status.stop, SearchStop::tie);
  EXPECT_EQ(o.probes, 1);
  EXPECT_NEAR(o.status.lo, 0.25, 1e-3);
  EXPECT_DOUBLE_EQ(o.status.hi, 0.5);
  EXPECT_TRUE(o.status.lo_closed) << "they tie at 0.25: the bracket is [0.25, 0.5]";
  // A tie at a grid rate is probed past: grid 0.5 ties (crossing 0.52, band 0.03).
  const Outcome g = run({0.52, 0.03}, 0.02, 4096);
  EXPECT_GE(g.probes, 1);
  EXPECT_GE(g.status.hi, 0.52);
}

TEST(BreakEvenSearch, NeverSplitsAForcedQuota) {
  // 32 units a step: rates are multiples of 1/32, the bracket ends one quota wide.
  const Outcome o = run({0.3, 0.0}, 0.001, 32);
  EXPECT_EQ(o.status.stop, SearchStop::resolution);
  EXPECT_NEAR(o.status.hi - o.status.lo, 1.0 / 32, 1e-12);
  EXPECT_LT(o.status.lo, 0.3);
  EXPECT_GE(o.status.hi, 0.3);
}

TEST(BreakEvenSearch, NothingToBisectWhenNeverFasterOrFasterFromZero) {
  const std::set<double> grid{0, 1};
  EXPECT_EQ(search_status(break_even_of({{0, 0.5, Verdict::slower}, {1, 0.9, Verdict::slower}}),
                          0.02, 64, grid)
                .stop,
            SearchStop::no_bracket);
  EXPECT_EQ(search_status(break_even_of({{0, 1.5, Verdict::faster}, {1, 9, Verdict::faster}}), 0.02,
                          64, grid)
                .stop,
            SearchStop::no_bracket);
  EXPECT_EQ(
      search_text(search_status(break_even_of({{0, 0.5, Verdict::slower}, {1, 9, Verdict::faster}}),
                                0.02, 64, grid)),
      "search=open bracket=(0,1] next=0.5");
}

// With G = 4 heads a group and hits per head, the KV read changes only when a whole group hits:
// the search probes only those quotas, and stops when the bracket holds no other work.
TEST(BreakEvenSearch, ProbesOnlyRatesThatChangeTheWork) {
  TunePoint p;
  p.shape.batch = 2;
  p.shape.q_heads = 16;
  p.shape.kv_heads = 4;
  p.shape.head_dim = 64;
  p.context = 4096;
  p.mac.ring_capacity = 256;
  p.mac.band = 64;
  p.forced.lag = {LagKind::uniform, 1, 32};
  const int units = 32;
  const std::vector<int> changes = work_changes(p, units);
  // 8 groups: at most 8 quotas change the work, the last one at 32 (every group all-hit).
  ASSERT_FALSE(changes.empty());
  EXPECT_LE(changes.size(), 8u);
  EXPECT_EQ(changes.back(), units);
  EXPECT_GE(changes.front(), 4) << "a group needs 4 hits";
  // MAC faster from the second change on; grid {0, 1}.
  const int crossing = changes.size() > 1 ? changes[1] : changes[0];
  std::vector<CurvePoint> curve{{0, 0.8, Verdict::slower}, {1, 9, Verdict::faster}};
  const std::set<double> grid{0, 1};
  SearchStatus st;
  int probes = 0;
  for (; probes < 10; ++probes) {
    st = search_status(break_even_of(curve), 0.001, units, grid, &changes);
    if (st.stop != SearchStop::open) break;
    const int k = static_cast<int>(std::lround(*st.next * units));
    EXPECT_NE(std::find(changes.begin(), changes.end(), k), changes.end()) << k;
    curve.push_back({*st.next, 1, k >= crossing ? Verdict::faster : Verdict::slower});
  }
  EXPECT_EQ(st.stop, SearchStop::resolution);
  EXPECT_DOUBLE_EQ(st.hi, double(crossing) / units) << "the first rate of the crossing's work";
  EXPECT_LE(probes, 4);
  // Verdicts that differ on equal work contradict each other: a tie, not a bracket.
  if (changes.front() > 2) {
    const double a = 1.0 / units, b = double(changes.front() - 1) / units;
    const auto t = search_status(
        break_even_of({{a, 1, Verdict::slower}, {b, 1, Verdict::faster}, {1, 9, Verdict::faster}}),
        0.001, units, grid, &changes);
    EXPECT_EQ(t.stop, SearchStop::tie);
  }
}

// Probes are rows of the chosen config alone; they must not vote in the choice of config.
TEST(BreakEvenSearch, ProbesDoNotChangeTheChosenConfig) {
  auto row = [](double hit, const std::string& params, double mac_ms, double full_ms) {
    PairRow r;
    r.bucket = {{128, 32, 8, DType::bf16, 16}, 4, 16384};
    r.hit_rate = hit;
    r.variant = "lag=uniform(1,64),coherence=per-head";
    r.mac_config = {"mac", {{"chunk", Scalar{params}}}, MacParams{}};
    r.full_config = {"full", {{"chunk", Scalar{params}}}, std::nullopt};
    auto t = [](double ms) {
      TimeStats s;
      s.samples = 10;
      s.median_s = ms * 1e-3;
      s.q1_s = s.median_s * 0.99;
      s.q3_s = s.median_s * 1.01;
      return s;
    };
    r.mac = t(mac_ms);
    r.full = t(full_ms);
    return r;
  };
  // a is 10% faster than b at both grid rates; b is chosen nowhere.
  std::vector<PairRow> rows;
  for (double h : {0.0, 1.0}) {
    rows.push_back(row(h, "a", (2 - h) * 0.9, 1.5));
    rows.push_back(row(h, "b", (2 - h), 1.5));
  }
  const auto before = decide(rows, {});
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(launch_text(before[0].mac.config.launch), "chunk=a");
  // Probes of a at 0.5 and 0.25: a alone there (its ratio to the best at those rates is 1).
  rows.push_back(row(0.5, "a", 1.5 * 0.9, 1.5));
  rows.push_back(row(0.25, "a", 1.75 * 0.9, 1.5));
  const auto after = decide(rows, {});
  EXPECT_EQ(launch_text(after[0].mac.config.launch), "chunk=a");
  EXPECT_DOUBLE_EQ(after[0].mac.score, before[0].mac.score) << "scored on the grid's rates only";
  // ... and they are on its curve: the break-even moves from 1 to 0.5.
  EXPECT_DOUBLE_EQ(*before[0].break_even.hit_rate, 1.0);
  EXPECT_DOUBLE_EQ(*after[0].break_even.hit_rate, 0.5);
  EXPECT_DOUBLE_EQ(*after[0].break_even.lo, 0.25);
}

}  // namespace
}  // namespace mactune::tuner
