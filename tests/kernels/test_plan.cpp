// The planner (kernels/plan.h, plan_serial.h): every token of every span in exactly one item,
// items never straddle cache_end and are never shorter than min_chunk unless their segment is,
// every item in exactly one dispatch entry, the arrays' capacity respected; on issue 4's random
// skewed steps, with the CUDA and the CPU policies, the modeled makespan stays near its bound.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/plan_model.h"
#include "plan_steps.h"

namespace mactune {
namespace {

std::vector<GroupSpan> random_groups(std::mt19937_64& rng, int n, int max_len) {
  std::uniform_int_distribution<int> len(1, max_len);
  std::vector<GroupSpan> g;
  for (int i = 0; i < n; ++i) {
    GroupSpan s;
    s.batch_index = i / 4;
    s.kv_head = i % 4;
    s.kv_len = len(rng);
    s.cache_end = std::uniform_int_distribution<int>(0, s.kv_len)(rng);
    s.begin = std::uniform_int_distribution<int>(0, s.cache_end)(rng);
    g.push_back(s);
  }
  return g;
}

void expect_valid(const std::vector<GroupSpan>& groups, const HostPlan& p, const PlanLimits& l) {
  ASSERT_EQ(p.groups.size(), groups.size());
  int next_first = 0;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const GroupSpan& g = groups[gi];
    const GroupItems& mp = p.groups[gi];
    ASSERT_EQ(mp.first, next_first) << "group " << gi;  // no item shared or skipped
    ASSERT_LE(mp.first, mp.split);
    ASSERT_LE(mp.split, mp.last);
    int at = g.begin;
    for (int i = mp.first; i < mp.last; ++i) {
      const WorkItem& w = p.items[static_cast<std::size_t>(i)];
      ASSERT_EQ(w.group, static_cast<int>(gi));
      ASSERT_EQ(w.batch_index, g.batch_index);
      ASSERT_EQ(w.kv_head, g.kv_head);
      if (i == mp.split) at = g.cache_end;  // the tail starts at cache_end, whatever came before
      ASSERT_EQ(w.kv_begin, at) << "group " << gi << " item " << i;
      ASSERT_GT(w.kv_end, w.kv_begin);
      const int seg = i < mp.split ? 0 : 1;
      if (seg == 0) {
        ASSERT_LE(w.kv_end, g.cache_end);
      }
      if (segment_len(g, seg) >= l.min_chunk) {
        ASSERT_GE(w.kv_end - w.kv_begin, l.min_chunk);
      }
      at = w.kv_end;
    }
    ASSERT_EQ(
        mp.split > mp.first ? g.cache_end : g.begin,
        mp.split > mp.first ? p.items[static_cast<std::size_t>(mp.split - 1)].kv_end : g.begin);
    ASSERT_EQ(mp.last > mp.split ? p.items[static_cast<std::size_t>(mp.last - 1)].kv_end : g.kv_len,
              g.kv_len)
        << "group " << gi;
    if (g.cache_end > g.begin) {
      ASSERT_GT(mp.split, mp.first);
    }
    if (g.kv_len > g.cache_end) {
      ASSERT_GT(mp.last, mp.split);
    }
    next_first = mp.last;
  }
  ASSERT_EQ(next_first, p.choice.items);
  std::vector<int> seen(static_cast<std::size_t>(p.choice.items), 0);
  for (const DispatchEntry& e : p.dispatch) {
    ASSERT_LE(0, e.first);
    ASSERT_LE(e.first, e.last);
    ASSERT_LE(e.last, p.choice.items);
    for (int i = e.first; i < e.last; ++i) ++seen[static_cast<std::size_t>(i)];
  }
  for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "item " << i;
  ASSERT_LE(p.choice.items, plan_capacity(static_cast<int>(groups.size()), l));
  if (p.choice.kind == PlanKind::balanced) {
    ASSERT_EQ(p.choice.entries, plan_parts(l));
  } else {
    ASSERT_EQ(p.choice.entries, p.choice.items);
    ASSERT_GE(p.choice.chunk, l.min_chunk);
  }
}

TEST(Plan, CoversEverySpanOnceOnRandomGroups) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    const auto groups = random_groups(rng, 1 + trial % 37, 1 + trial * 97);
    PlanLimits l;
    l.workers = 1 + trial % 50;
    l.max_waves = 1 + trial % 8;
    l.parts_per_worker = 1 + trial % 3;
    l.min_chunk = 1 + trial % 200;
    l.item_cost = trial % 5 == 0 ? 0 : 16 * (trial % 9);
    const HostPlan p = make_plan(groups, l);
    ASSERT_NO_FATAL_FAILURE(expect_valid(groups, p, l)) << "trial " << trial;
  }
}

TEST(Plan, BothKindsAreChosen) {
  const PlanLimits l = cuda_plan_limits(396, 128);
  testing::BenchmarkPoint small{32768, 64, 8, 1.0};  // hit 1: little work, many short segments
  testing::BenchmarkPoint large{131072, 16, 8, 0.0};
  const auto a = testing::benchmark_step(small, 1), b = testing::benchmark_step(large, 1);
  const HostPlan pa = make_plan(a, l), pb = make_plan(b, l);
  EXPECT_EQ(pa.choice.kind, PlanKind::uniform);
  EXPECT_EQ(pb.choice.kind, PlanKind::balanced);
  ASSERT_NO_FATAL_FAILURE(expect_valid(a, pa, l));
  ASSERT_NO_FATAL_FAILURE(expect_valid(b, pb, l));
}

TEST(Plan, EmptyAndTinySteps) {
  const PlanLimits l = cuda_plan_limits(396, 128);
  std::vector<GroupSpan> empty{{0, 0, 5, 5, 5}, {0, 1, 7, 7, 7}};
  const HostPlan p = make_plan(empty, l);
  EXPECT_EQ(p.choice.items, 0);
  EXPECT_EQ(p.choice.entries, 0);
  EXPECT_EQ(simulate_dispatch(p, l), 0);
  std::vector<GroupSpan> one{{0, 0, 0, 1, 1}};
  const HostPlan q = make_plan(one, l);
  ASSERT_NO_FATAL_FAILURE(expect_valid(one, q, l));
  EXPECT_EQ(q.choice.items, 1);
}

TEST(Plan, BadInputThrows) {
  std::vector<GroupSpan> bad{{0, 0, 5, 3, 9}};
  EXPECT_THROW(make_plan(bad, cuda_plan_limits(4, 16)), Error);
  PlanLimits l;
  l.workers = 0;
  std::vector<GroupSpan> ok{{0, 0, 0, 3, 9}};
  EXPECT_THROW(make_plan(ok, l), Error);
}

// The dispatch rule: worker c starts entry c, and the model replays the claims in order.
TEST(Plan, DispatchRuleHandsOutEveryEntryOnce) {
  EXPECT_EQ(first_claim(7), 7);
  EXPECT_EQ(next_claim(396, 0), 396);
  EXPECT_EQ(next_claim(396, 5), 401);
  HostPlan p;
  p.items = {WorkItem{0, 0, 0, 0, 100}, WorkItem{0, 0, 0, 100, 110}, WorkItem{0, 0, 0, 110, 120}};
  p.dispatch = {{0, 1}, {1, 2}, {2, 3}};
  PlanLimits l;
  l.workers = 2;
  l.item_cost = 0;
  // Worker 0: item 0 (100); worker 1: item 1 (10) then item 2 (10): makespan 100.
  EXPECT_EQ(simulate_dispatch(p, l), 100);
  p.dispatch = {{1, 3}, {0, 1}};
  EXPECT_EQ(simulate_dispatch(p, l), 100);
}

// Issue 4's skewed steps: near the bound with the CUDA and the CPU policies.
TEST(Plan, SkewedStepsStayNearTheBound) {
  const struct {
    const char* name;
    PlanLimits l;
  } policies[] = {{"cuda 132x3", cuda_plan_limits(396, 128)},
                  {"cuda 108x2", cuda_plan_limits(216, 128)},
                  {"cpu 2", cpu_plan_limits(2, 256)},
                  {"cpu 32", cpu_plan_limits(32, 256)}};
  for (const auto& pol : policies)
    for (double sigma : {0.1, 0.2, 0.3}) {
      std::mt19937_64 rng(1000 + static_cast<unsigned>(sigma * 10));
      double worst = 0;
      for (int t = 0; t < 48; ++t) {
        const auto spans = testing::skewed_step(rng, sigma, 1 + (t * 7) % 64);
        const HostPlan p = make_plan(spans, pol.l);
        ASSERT_NO_FATAL_FAILURE(expect_valid(spans, p, pol.l));
        worst = std::max(worst, plan_stats(spans, p, pol.l).ratio());
      }
      EXPECT_LE(worst, 1.05) << pol.name << " sigma " << sigma;
    }
}

}  // namespace
}  // namespace mactune
