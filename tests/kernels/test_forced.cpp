// The forced-hit quotas of kernels/forced.h: the skip-ratio solver against a brute force over
// every hit count, the per-request shares of a step's budget, and forced_choice's decisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/forced.h"
#include "kernels/problem.h"

namespace mactune {
namespace {

// Some n in [0, units] hit groups skip `skipped` tokens exactly, each reading r + 1 to
// r + max_lag tokens: the definition, tried n by n.
bool reachable_by_brute_force(long long skipped, int units, int kv_len, int band, int max_lag) {
  if (skipped == 0) return true;
  if (max_lag < 1) return false;
  for (int n = 1; n <= units; ++n) {
    const long long read = static_cast<long long>(n) * kv_len - skipped;  // by the hit groups
    if (read >= static_cast<long long>(n) * (band + 1) &&
        read <= static_cast<long long>(n) * (band + max_lag))
      return true;
  }
  return false;
}

TEST(ForcedSkip, SolverIsExactOrUnreachableAsTheBruteForceSays) {
  std::mt19937_64 rng(7);
  int reachable = 0, unreachable = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int units = 1 + static_cast<int>(rng() % 16);
    const int kv_len = 1 + static_cast<int>(rng() % 300);
    const int band = static_cast<int>(rng() % 40);
    const int K = 1 + static_cast<int>(rng() % 200);
    const int m = kv_len - 1;
    const int max_lag = forced_max_lag(m, K, band);
    const double s = trial % 10 == 0 ? (trial % 20 == 0 ? 0.0 : 1.0)
                                     : std::uniform_real_distribution<double>(0, 1)(rng);
    const long long total = static_cast<long long>(units) * kv_len;
    const long long skipped = forced_skip_round(s, total);
    const SkipSolution sol = forced_skip_solve(skipped, units, kv_len, band, max_lag);
    SCOPED_TRACE(::testing::Message() << "U " << units << " kv_len " << kv_len << " r " << band
                                      << " K " << K << " s " << s << " skipped " << skipped);
    ASSERT_EQ(sol.reachable, reachable_by_brute_force(skipped, units, kv_len, band, max_lag));
    if (!sol.reachable) {
      ++unreachable;
      continue;
    }
    ++reachable;
    ASSERT_GE(sol.hits, 0);
    ASSERT_LE(sol.hits, units);
    // The smallest hit count that can: one fewer cannot skip that much.
    if (sol.hits > 0) {
      const long long fewer = static_cast<long long>(sol.hits - 1) * (kv_len - band - 1);
      EXPECT_LT(fewer, skipped);
    }
    long long read = static_cast<long long>(units - sol.hits) * kv_len;  // the misses
    for (int rank = 0; rank < sol.hits; ++rank) {
      const int r = sol.base_read + (rank < sol.extra ? 1 : 0);
      const int lag = r - band;
      ASSERT_GE(lag, 1);
      ASSERT_LE(lag, max_lag);
      read += r;
    }
    EXPECT_EQ(read, total - skipped);
  }
  EXPECT_GT(reachable, 1000);
  EXPECT_GT(unreachable, 1000);
}

TEST(ForcedSkip, RequestSharesAddUpToTheStepsRoundedBudget) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    const double s = std::uniform_real_distribution<double>(0, 1)(rng);
    const int kv_heads = 1 + static_cast<int>(rng() % 8);
    const int n = 1 + static_cast<int>(rng() % 9);
    long long before = 0, sum = 0;
    for (int b = 0; b < n; ++b) {
      const int kv_len = 1 + static_cast<int>(rng() % 100000);
      const long long share = forced_skip_budget(s, before, kv_len, kv_heads);
      // Within one token of s of the request's own KV.
      EXPECT_LE(std::abs(double(share) - s * kv_len * kv_heads), 1.0);
      sum += share;
      before += kv_len;
    }
    EXPECT_EQ(sum, forced_skip_round(s, before * kv_heads));
  }
}

// forced_choice at every head of a step: all G heads of a group decide together, lags stay in
// [1, max_lag], and the tokens the decisions read (misses kv_len, hits lag + r per group) are
// the step's total minus round(s x total), for requests of different lengths.
TEST(ForcedSkip, ChoicesReadExactlyTheStepsShareAtMixedLengths) {
  const int Hq = 12, Hkv = 3, G = Hq / Hkv, K = 512, band = 4;
  const std::vector<int> ms = {900, 1500, 1501, 700, 2048};
  int exact = 0;
  for (const double s : {0.0, 0.3, 0.5, 0.8, 0.9, 0.95, 0.99}) {
    ForcedHits f;
    f.enabled = true;
    f.quota = ForcedQuota::skip_ratio;
    f.skip_ratio = s;
    for (std::uint64_t step : {0ull, 1ull, 17ull}) {
      SCOPED_TRACE(::testing::Message() << "s " << s << " step " << step);
      long long before = 0, read = 0, total = 0;
      bool all_reachable = true;
      for (int b = 0; b < static_cast<int>(ms.size()); ++b) {
        const int m = ms[static_cast<std::size_t>(b)];
        all_reachable = all_reachable && forced_skip_request(f, m, before, Hkv, K, band).reachable;
        for (int g = 0; g < Hkv; ++g) {
          const ForcedSite first{b, int(ms.size()), g * G, Hq, Hkv, m, before};
          const ForcedChoice c = forced_choice(f, step, first, K, band);
          for (int j = 1; j < G; ++j) {
            ForcedSite at = first;
            at.head = g * G + j;
            const ForcedChoice cj = forced_choice(f, step, at, K, band);
            EXPECT_EQ(cj.hit, c.hit);
            EXPECT_EQ(cj.lag, c.lag);
          }
          if (c.hit) {
            EXPECT_GE(c.lag, 1);
            EXPECT_LE(c.lag, forced_max_lag(m, K, band));
            read += (m + 1) - cache_end(m - c.lag, band);
          } else {
            read += m + 1;
          }
          total += m + 1;
        }
        before += m + 1;
      }
      if (all_reachable) {
        ++exact;
        EXPECT_EQ(total - read, forced_skip_round(s, total));
      }
    }
  }
  EXPECT_GE(exact, 3 * 5);  // 0, 0.3, 0.8 ... 0.99 at least, at every step
}

// The hit-rate quota is unchanged by the refactor: the same units hit as the permutation of
// (seed, step) ranks them, and forced_choice agrees with forced_unit_hits and forced_lag.
TEST(ForcedHitRate, ChoiceIsTheQuotaAndTheLagDraw) {
  ForcedHits f;
  f.enabled = true;
  f.hit_rate = 0.4;
  f.lag = {LagKind::uniform, 1, 30};
  for (const Coherence c : {Coherence::per_head, Coherence::per_group}) {
    f.coherence = c;
    const int Hq = 8, Hkv = 2, n = 3, m = 100, K = 64, band = 4;
    const int units = n * (c == Coherence::per_head ? Hq : Hkv);
    int hits = 0;
    for (int b = 0; b < n; ++b)
      for (int h = 0; h < Hq; ++h) {
        const ForcedChoice ch = forced_choice(f, 5, {b, n, h, Hq, Hkv, m, 0}, K, band);
        const int unit = c == Coherence::per_head ? b * Hq + h : b * Hkv + h / (Hq / Hkv);
        EXPECT_EQ(ch.hit, forced_unit_hits(f, 5, unit, units));
        if (ch.hit) {
          EXPECT_EQ(ch.lag, forced_lag(f, 5, unit, forced_max_lag(m, K, band)));
          if (c == Coherence::per_head || h % (Hq / Hkv) == 0) ++hits;
        }
      }
    EXPECT_EQ(hits, forced_quota(0.4, units));
  }
}

}  // namespace
}  // namespace mactune
