// The planner policy on random skewed decode steps (issue 4): per-head skip ratios from
// N(sigma, sigma) clipped to [0, 1], batch 1..64, contexts 4K..256K, on GPU-like and CPU-like
// worker budgets. Every token of every span is covered exactly once, items never straddle
// cache_end(m), the largest item stays within 10% of the lower bound, and the list-scheduled
// makespan stays near it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/error.h"
#include "kernels/stats.h"
#include "schedules/planner.h"
#include "skewed_spans.h"

namespace mactune::sched {
namespace {

struct BudgetCase {
  const char* name;
  PlanPolicy policy;
};

const BudgetCase kBudgets[] = {
    {"Cuda132x4", {cuda_budget(132, 4), CostModel{1.0, 128.0}, 128}},
    {"Cuda108x2", {cuda_budget(108, 2), CostModel{1.0, 128.0}, 128}},
    {"Cpu2", {cpu_budget(2), CostModel{1.0, 64.0}, 256}},
    {"Cpu32", {cpu_budget(32), CostModel{1.0, 64.0}, 256}},
};

// Every token of every span in exactly one item, in order, split at cache_end.
void expect_exact_cover(const std::vector<GroupSpan>& groups, const Plan& plan) {
  ASSERT_EQ(plan.groups.size(), groups.size());
  int next_first = 0;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const GroupSpan& g = groups[gi];
    const GroupItems& mp = plan.groups[gi];
    ASSERT_EQ(mp.first, next_first) << "group " << gi;  // no item shared or skipped
    ASSERT_LE(mp.first, mp.split);
    ASSERT_LE(mp.split, mp.last);
    int at = g.begin;
    for (int i = mp.first; i < mp.last; ++i) {
      const WorkItem& w = plan.items[static_cast<std::size_t>(i)];
      ASSERT_EQ(w.group, static_cast<int>(gi));
      ASSERT_EQ(w.batch_index, g.batch_index);
      ASSERT_EQ(w.kv_head, g.kv_head);
      ASSERT_EQ(w.kv_begin, at);
      ASSERT_GT(w.kv_end, w.kv_begin);
      ASSERT_LE(w.kv_end - w.kv_begin, plan.chunk);
      if (i < mp.split)
        ASSERT_LE(w.kv_end, g.cache_end);
      else
        ASSERT_GE(w.kv_begin, g.cache_end);
      if (i == mp.split && mp.split > mp.first) {
        ASSERT_EQ(w.kv_begin, g.cache_end);
      }
      at = w.kv_end;
    }
    ASSERT_EQ(at, g.kv_len) << "group " << gi;
    next_first = mp.last;
  }
  ASSERT_EQ(next_first, static_cast<int>(plan.items.size()));
}

class PlannerSkewed : public ::testing::TestWithParam<std::tuple<double, int>> {};

TEST_P(PlannerSkewed, CoversOnceAndBalances) {
  const double sigma = std::get<0>(GetParam());
  const BudgetCase& budget = kBudgets[std::get<1>(GetParam())];
  const PlanPolicy& policy = budget.policy;
  std::mt19937_64 rng(1000 + static_cast<unsigned>(sigma * 10) * 10 + std::get<1>(GetParam()));
  const int trials = 128;
  int over = 0;
  double worst_largest = 0.0, worst_planned = 0.0;
  for (int t = 0; t < trials; ++t) {
    testing::SkewSpec spec;
    spec.sigma = sigma;
    spec.batch = 1 + t % 64;
    const auto step = testing::skewed_step(rng, spec);
    const StepPlan p = plan_step(step.groups, policy);
    ASSERT_NO_FATAL_FAILURE(expect_exact_cover(step.groups, p.plan));
    ASSERT_LE(static_cast<int>(p.plan.items.size()), p.capacity);
    ASSERT_GE(p.plan.chunk, policy.min_chunk);

    const PlanStats s = plan_stats(step.groups, p.plan, policy);
    std::int64_t tokens = 0;
    for (const GroupSpan& g : step.groups) tokens += g.kv_len - g.begin;
    ASSERT_EQ(s.tokens, tokens);
    ASSERT_GE(s.planned, s.lower_bound * (1 - 1e-12));  // a lower bound indeed
    ASSERT_LE(s.planned, s.predicted * (1 + 1e-12));    // and the chosen bound holds
    const double largest = s.largest_item_cost / s.lower_bound;
    worst_largest = std::max(worst_largest, largest);
    worst_planned = std::max(worst_planned, s.planned / s.lower_bound);
    if (largest > 1.10) {
      // Only a single wave may exceed it, where the segments leave no room (each needs an
      // item of its own): then a plan of smaller items, within 10%, is no faster by the
      // planner's own bound.
      ++over;
      ASSERT_LE(s.items, s.workers) << "batch " << spec.batch;
      const double cap_tokens =
          (1.10 * s.lower_bound - policy.cost.per_item) / policy.cost.per_token;
      const auto within = static_cast<std::int32_t>(std::floor(cap_tokens));
      const ChunkChoice alt =
          predict_chunk(step.groups.data(), static_cast<std::int32_t>(step.groups.size()),
                        policy.limits(), within);
      ASSERT_GE(alt.makespan, p.predicted.makespan) << "batch " << spec.batch;
    }
  }
  EXPECT_LE(over, trials / 50) << "largest item over 1.1 x the lower bound too often";
  EXPECT_LE(worst_largest, 1.20);
  EXPECT_LE(worst_planned, 1.30);
  RecordProperty("worst_largest_over_lb", std::to_string(worst_largest));
  RecordProperty("worst_planned_over_lb", std::to_string(worst_planned));
}

INSTANTIATE_TEST_SUITE_P(
    Skewed, PlannerSkewed,
    ::testing::Combine(::testing::Values(0.1, 0.2, 0.3), ::testing::Range(0, 4)),
    [](const ::testing::TestParamInfo<PlannerSkewed::ParamType>& param) {
      const int sigma = static_cast<int>(std::lround(std::get<0>(param.param) * 10));
      return "Sigma0_" + std::to_string(sigma) + "_" + kBudgets[std::get<1>(param.param)].name;
    });

TEST(Planner, PaddedPlanMatchesTheHostPlan) {
  std::mt19937_64 rng(4);
  testing::SkewSpec spec;
  spec.batch = 12;
  const auto step = testing::skewed_step(rng, spec);
  const PlanPolicy policy{cuda_budget(132, 2), CostModel{}, 128};
  const StepPlan p = plan_step(step.groups, policy);
  const PaddedPlan padded = plan_padded(step.groups, policy);
  ASSERT_EQ(static_cast<int>(padded.items.size()), p.capacity);
  ASSERT_EQ(padded.predicted.items, static_cast<int>(p.plan.items.size()));
  for (std::size_t i = 0; i < padded.items.size(); ++i) {
    if (i < p.plan.items.size()) {
      EXPECT_EQ(padded.items[i].kv_begin, p.plan.items[i].kv_begin);
      EXPECT_EQ(padded.items[i].kv_end, p.plan.items[i].kv_end);
      EXPECT_EQ(padded.items[i].group, p.plan.items[i].group);
    } else {
      EXPECT_TRUE(is_padding(padded.items[i]));
    }
  }
}

// Spans from the per-group accounting of a step: the planner reads exactly the tokens the
// step's statistics say it reads.
TEST(Planner, GroupSpansFromStepAccounting) {
  std::mt19937_64 rng(8);
  Problem shape;
  shape.q_heads = 32;
  shape.kv_heads = 8;
  MacParams mac;
  StepStats stats;
  std::vector<GroupInfo> groups;
  for (int b = 0; b < 5; ++b) {
    const int m = 3000 + static_cast<int>(rng() % 20000);
    std::vector<HeadDecision> d(static_cast<std::size_t>(shape.q_heads));
    for (HeadDecision& h : d) {
      h.eligible = true;
      h.hit = rng() % 3 != 0;
      if (h.hit) {
        h.p = m - 1 - static_cast<int>(rng() % 64);
        h.start = cache_end(h.p, mac.band);
      }
    }
    account_request(shape, mac, m, d.data(), groups, stats);
  }
  const auto spans = group_spans(groups, shape.kv_heads);
  ASSERT_EQ(spans.size(), groups.size());
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].batch_index, static_cast<int>(i) / shape.kv_heads);
    EXPECT_EQ(spans[i].kv_head, static_cast<int>(i) % shape.kv_heads);
    EXPECT_EQ(spans[i].begin, groups[i].begin);
    tokens += spans[i].kv_len - spans[i].begin;
  }
  EXPECT_EQ(tokens, stats.kv_tokens_read);
  const StepPlan p = plan_step(spans, PlanPolicy{cpu_budget(4), CostModel{}, 256});
  expect_exact_cover(spans, p.plan);
}

TEST(Planner, ListMakespanTakesTheNextItemWhenFree) {
  // Two workers, items 4, 1, 1, 1, 3 tokens, no overhead: w0 takes 4; w1 takes 1, 1, 1 (t=3),
  // then 3 (t=6); makespan 6.
  const std::vector<WorkItem> items = {
      {0, 0, 0, 0, 4}, {0, 0, 0, 4, 5}, {0, 0, 0, 5, 6}, {0, 0, 0, 6, 7}, {0, 0, 0, 7, 10}};
  EXPECT_DOUBLE_EQ(list_makespan(items, CostModel{1.0, 0.0}, 2), 6.0);
  // With 1 per item (costs 5, 2, 2, 2, 4): w1 runs three 2s to t=6, w0 takes the 4 at t=5: 9.
  EXPECT_DOUBLE_EQ(list_makespan(items, CostModel{1.0, 1.0}, 2), 9.0);
}

TEST(Planner, RefusesMalformedPoliciesAndSpans) {
  const std::vector<GroupSpan> ok = {{0, 0, 0, 10, 20}};
  EXPECT_THROW(plan_step(ok, PlanPolicy{WorkerBudget{0, 1}, CostModel{}, 16}), Error);
  EXPECT_THROW(plan_step(ok, PlanPolicy{WorkerBudget{4, 0}, CostModel{}, 16}), Error);
  EXPECT_THROW(plan_step(ok, PlanPolicy{WorkerBudget{4, 1}, CostModel{0.0, 1.0}, 16}), Error);
  EXPECT_THROW(plan_step(ok, PlanPolicy{WorkerBudget{4, 1}, CostModel{}, 0}), Error);
  const std::vector<GroupSpan> bad = {{0, 0, 12, 10, 20}};  // begin past cache_end
  EXPECT_THROW(plan_step(bad, PlanPolicy{cpu_budget(2), CostModel{}, 16}), Error);
  EXPECT_THROW(cuda_budget(0, 4), Error);
  EXPECT_EQ(cuda_budget(132, 4).workers, 528);
  EXPECT_EQ(cpu_budget(8).workers, 8);
}

}  // namespace
}  // namespace mactune::sched
