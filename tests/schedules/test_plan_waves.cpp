// The wave-quantized planning primitives of kernels/plan.h: exact division, item counts, the
// chunk choice against a brute force, padded arrays and per-head merge starts.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/plan.h"

namespace mactune {
namespace {

std::vector<GroupSpan> random_spans(std::mt19937_64& rng, int n, int max_len) {
  std::uniform_int_distribution<int> len(0, max_len);
  std::vector<GroupSpan> g;
  for (int i = 0; i < n; ++i) {
    GroupSpan s;
    s.batch_index = i / 8;
    s.kv_head = i % 8;
    s.kv_len = len(rng);
    s.cache_end = std::uniform_int_distribution<int>(0, s.kv_len)(rng);
    s.begin = std::uniform_int_distribution<int>(0, s.cache_end)(rng);
    g.push_back(s);
  }
  return g;
}

TEST(ChunkDivider, ExactForEdgeAndRandomOperands) {
  const std::uint32_t max = std::numeric_limits<std::uint32_t>::max();
  const std::uint32_t edges[] = {1,        2,       3,     7,     127,      128,
                                 255,      256,     65535, 65536, 1u << 30, (1u << 31) - 1,
                                 1u << 31, max - 1, max};
  for (std::uint32_t d : edges) {
    const ChunkDivider div(d);
    for (std::uint32_t x : edges) EXPECT_EQ(div.divide(x), x / d) << x << " / " << d;
    EXPECT_EQ(div.divide(0), 0u);
  }
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const auto x = static_cast<std::uint32_t>(rng());
    const auto d = static_cast<std::uint32_t>(rng() >> (32 + rng() % 32)) | 1u;
    ASSERT_EQ(ChunkDivider(d).divide(x), x / d) << x << " / " << d;
    ASSERT_EQ(ChunkDivider(d + 1).divide(x), x / (d + 1)) << x << " / " << d + 1;
  }
}

TEST(PlanItemCount, EqualsTheSumOfChunksOf) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const auto g = random_spans(rng, 1 + trial % 50, 1 + trial * 300);
    const int chunk = 1 + static_cast<int>(rng() % (2 + trial * 10));
    std::int64_t naive = 0;
    for (const GroupSpan& s : g)
      naive += chunks_of(s.cache_end - s.begin, chunk) + chunks_of(s.kv_len - s.cache_end, chunk);
    ASSERT_EQ(plan_item_count(g.data(), static_cast<int>(g.size()), chunk), naive);
  }
}

// Five tails of 100 tokens on 4 workers: one wave is impossible (5 segments); 2 waves of
// 100-token items cost 200; 5 waves of 25 tokens cost 125, the ideal 500 / 4.
TEST(ChooseChunkWaves, RoundsToWholeWavesWithoutOverhead) {
  std::vector<GroupSpan> g;
  for (int i = 0; i < 5; ++i) g.push_back({i, 0, 0, 0, 100});
  PlanLimits l;
  l.workers = 4;
  l.max_waves = 8;
  l.min_chunk = 1;
  l.item_cost = 0.0;
  const ChunkChoice c = choose_chunk_waves(g.data(), 5, l);
  EXPECT_EQ(c.chunk, 25);
  EXPECT_EQ(c.items, 20);
  EXPECT_EQ(c.waves, 5);
  EXPECT_DOUBLE_EQ(c.makespan, 125.0);
  // The smallest chunk for the whole item budget is not the best: 30 items of 17 take 8 waves.
  const int smallest = choose_chunk(g.data(), 5, l.workers * l.max_waves, 1);
  EXPECT_EQ(smallest, 17);
  EXPECT_DOUBLE_EQ(predict_chunk(g.data(), 5, l, smallest).makespan, 136.0);
  // Nor the smallest for one wave: 5 segments need 5 items, so 100-token chunks in 2 waves.
  EXPECT_EQ(choose_chunk(g.data(), 5, l.workers, 1), 100);
  EXPECT_DOUBLE_EQ(predict_chunk(g.data(), 5, l, 100).makespan, 200.0);
}

TEST(ChooseChunkWaves, HighItemOverheadKeepsFewItems) {
  std::vector<GroupSpan> g;
  for (int i = 0; i < 5; ++i) g.push_back({i, 0, 0, 0, 100});
  PlanLimits l;
  l.workers = 4;
  l.max_waves = 8;
  l.min_chunk = 1;
  l.item_cost = 100.0;
  const ChunkChoice c = choose_chunk_waves(g.data(), 5, l);
  EXPECT_EQ(c.chunk, 100);  // 2 waves of (100 + 100) beat 5 waves of (25 + 100)
  EXPECT_EQ(c.items, 5);
  EXPECT_DOUBLE_EQ(c.makespan, 400.0);
}

// The narrowed searches equal a plain loop of choose_chunk over every wave count.
TEST(ChooseChunkWaves, EqualsBruteForceOverWaveCounts) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 400; ++trial) {
    const auto g = random_spans(rng, 1 + trial % 40, 1 + (trial % 17) * 900);
    const int n = static_cast<int>(g.size());
    PlanLimits l;
    l.workers = 1 + static_cast<int>(rng() % 200);
    l.max_waves = 1 + static_cast<int>(rng() % 12);
    l.min_chunk = 1 + static_cast<int>(rng() % 300);
    l.item_cost = static_cast<double>(rng() % 200);
    ChunkChoice best;
    for (int w = 1; w <= l.max_waves; ++w) {
      const ChunkChoice c =
          predict_chunk(g.data(), n, l, choose_chunk(g.data(), n, w * l.workers, l.min_chunk));
      if (w == 1 || c.makespan < best.makespan) best = c;
    }
    const ChunkChoice got = choose_chunk_waves(g.data(), n, l);
    ASSERT_DOUBLE_EQ(got.makespan, best.makespan) << "trial " << trial;
    ASSERT_EQ(got.chunk, best.chunk) << "trial " << trial;
    ASSERT_LE(got.items, plan_capacity(n, l));
    ASSERT_GE(got.chunk, l.min_chunk);
  }
}

TEST(PlanInto, FillsFixedArraysAndPadsTheRest) {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 100; ++trial) {
    const auto g = random_spans(rng, 1 + trial % 30, 1 + trial * 500);
    const int n = static_cast<int>(g.size());
    PlanLimits l;
    l.workers = 1 + trial % 64;
    l.max_waves = 1 + trial % 6;
    l.min_chunk = 16;
    l.item_cost = 32.0;
    const int capacity = plan_capacity(n, l);
    std::vector<WorkItem> items(static_cast<std::size_t>(capacity),
                                WorkItem{7, 7, 7, 7, 7});  // poison
    std::vector<GroupItems> mp(g.size(), GroupItems{-5, -5, -5});
    const ChunkChoice c = plan_into(g.data(), n, l, items.data(), mp.data(), capacity);
    ASSERT_GE(c.items, 0);
    ASSERT_EQ(c.items, plan_item_count(g.data(), n, c.chunk));
    std::vector<WorkItem> want(static_cast<std::size_t>(c.items));
    std::vector<GroupItems> want_mp(g.size());
    ASSERT_EQ(emit_plan(g.data(), n, c.chunk, want.data(), want_mp.data(), c.items), c.items);
    for (int i = 0; i < capacity; ++i) {
      const WorkItem& w = items[static_cast<std::size_t>(i)];
      if (i < c.items) {
        const WorkItem& x = want[static_cast<std::size_t>(i)];
        ASSERT_FALSE(is_padding(w));
        ASSERT_EQ(w.group, x.group);
        ASSERT_EQ(w.kv_begin, x.kv_begin);
        ASSERT_EQ(w.kv_end, x.kv_end);
      } else {
        ASSERT_TRUE(is_padding(w)) << "slot " << i;
        ASSERT_EQ(w.kv_begin, w.kv_end);
      }
    }
    for (std::size_t i = 0; i < g.size(); ++i) {
      ASSERT_EQ(mp[i].first, want_mp[i].first);
      ASSERT_EQ(mp[i].split, want_mp[i].split);
      ASSERT_EQ(mp[i].last, want_mp[i].last);
    }
    if (c.items > 0) {  // one slot short: refused, nothing written past the arrays
      const ChunkChoice small = plan_into(g.data(), n, l, items.data(), mp.data(), c.items - 1);
      EXPECT_EQ(small.items, -1);
    }
  }
}

TEST(FirstItemAt, SkipsExactlyTheItemsBelowAHeadsStart) {
  std::mt19937_64 rng(2);
  for (int trial = 0; trial < 200; ++trial) {
    const auto g = random_spans(rng, 1 + trial % 10, 1 + trial * 40);
    const int n = static_cast<int>(g.size());
    const int chunk = 1 + static_cast<int>(rng() % 97);
    std::vector<WorkItem> items(static_cast<std::size_t>(plan_item_count(g.data(), n, chunk)));
    std::vector<GroupItems> mp(g.size());
    emit_plan(g.data(), n, chunk, items.data(), mp.data(), static_cast<int>(items.size()));
    for (int gi = 0; gi < n; ++gi) {
      const GroupSpan& s = g[static_cast<std::size_t>(gi)];
      for (int start = s.begin; start <= s.kv_len; ++start) {
        const int f = first_item_at(s, mp[static_cast<std::size_t>(gi)], chunk, start);
        const GroupItems& m = mp[static_cast<std::size_t>(gi)];
        ASSERT_GE(f, m.first);
        ASSERT_LE(f, m.last);
        for (int i = m.first; i < f; ++i)
          ASSERT_LE(items[static_cast<std::size_t>(i)].kv_end, start);
        if (f < m.last) {
          ASSERT_GT(items[static_cast<std::size_t>(f)].kv_end, start);
        }
      }
    }
  }
}

TEST(OrderLongestFirst, IsAStablePermutationByLength) {
  std::mt19937_64 rng(31);
  const auto g = random_spans(rng, 40, 3000);
  const int n = static_cast<int>(g.size());
  const int chunk = 700;
  std::vector<WorkItem> items(static_cast<std::size_t>(plan_item_count(g.data(), n, chunk)));
  std::vector<GroupItems> mp(g.size());
  emit_plan(g.data(), n, chunk, items.data(), mp.data(), static_cast<int>(items.size()));
  const std::vector<std::int32_t> order = order_longest_first(items);
  ASSERT_EQ(order.size(), items.size());
  std::vector<bool> seen(items.size(), false);
  auto len = [&items](std::int32_t i) {
    return items[static_cast<std::size_t>(i)].kv_end - items[static_cast<std::size_t>(i)].kv_begin;
  };
  for (std::size_t k = 0; k < order.size(); ++k) {
    ASSERT_FALSE(seen[static_cast<std::size_t>(order[k])]);
    seen[static_cast<std::size_t>(order[k])] = true;
    if (k > 0) {
      ASSERT_GE(len(order[k - 1]), len(order[k]));
      if (len(order[k - 1]) == len(order[k])) {
        ASSERT_LT(order[k - 1], order[k]);
      }
    }
  }
}

}  // namespace
}  // namespace mactune
