// Planning primitives: every token of every span covered once, items never straddle
// cache_end, the budget is respected whenever it can be.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/plan.h"

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
    s.cache_end = std::uniform_int_distribution<int>(0, s.kv_len - 1)(rng);
    s.begin = std::uniform_int_distribution<int>(0, s.cache_end)(rng);
    g.push_back(s);
  }
  return g;
}

TEST(Plan, CoversEverySpanExactlyOnceAndSplitsAtCacheEnd) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const auto groups = random_groups(rng, 1 + trial % 37, 1 + trial * 97);
    const int budget = 1 + trial % 300;
    const Plan plan = make_simple_plan(groups, budget, 16);
    ASSERT_EQ(plan.groups.size(), groups.size());
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const GroupSpan& g = groups[gi];
      const GroupItems& mp = plan.groups[gi];
      ASSERT_LE(mp.first, mp.split);
      ASSERT_LE(mp.split, mp.last);
      int at = g.begin;
      for (int i = mp.first; i < mp.last; ++i) {
        const WorkItem& w = plan.items[static_cast<std::size_t>(i)];
        EXPECT_EQ(w.group, static_cast<int>(gi));
        EXPECT_EQ(w.kv_begin, at);  // contiguous, in order: covered exactly once
        EXPECT_GT(w.kv_end, w.kv_begin);
        EXPECT_LE(w.kv_end - w.kv_begin, plan.chunk);
        if (i < mp.split)
          EXPECT_LE(w.kv_end, g.cache_end);
        else
          EXPECT_GE(w.kv_begin, g.cache_end);
        at = w.kv_end;
      }
      EXPECT_EQ(at, g.kv_len);
    }
    const std::int64_t count = static_cast<std::int64_t>(plan.items.size());
    if (count > budget) {  // only when even the longest segment as one chunk cannot fit
      EXPECT_LE(count, 2 * static_cast<std::int64_t>(groups.size()));
    }
    EXPECT_LE(count, plan_capacity(static_cast<int>(groups.size()), budget));
  }
}

TEST(Plan, ChoosesTheSmallestChunkThatFits) {
  const std::vector<GroupSpan> g = {{0, 0, 0, 1000, 1256}, {1, 0, 500, 900, 1156}};
  const Plan plan = make_simple_plan(g, 16, 32);
  EXPECT_LE(plan.items.size(), 16u);
  EXPECT_GT(plan_item_count(g.data(), 2, plan.chunk - 1), 16);
}

TEST(Plan, EmitStopsAtCapacity) {
  const std::vector<GroupSpan> g = {{0, 0, 0, 100, 200}};
  std::vector<WorkItem> items(3);
  std::vector<GroupItems> mp(1);
  EXPECT_EQ(emit_plan(g.data(), 1, 10, items.data(), mp.data(), 3), -1);
  EXPECT_EQ(emit_plan(g.data(), 1, 100, items.data(), mp.data(), 3), 2);
}

}  // namespace
}  // namespace mactune
