// Decode steps for planner tests: the group spans a CUDA or CPU step plans over.
//   benchmark_step: the gpu-check table's steps (32 query heads, every request at the same
//     context, forced per-head hits with an exact quota, lag uniform in [1, 64], r = 256), or
//     with `skewed` each request's context uniform in [context / 4, context].
//   skewed_step: issue 4's random steps (contexts log-uniform in [4K, 256K], per-head skip
//     ratios from N(sigma, sigma) clipped to [0, 1]).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/config.h"
#include "kernels/plan.h"
#include "kernels/problem.h"

namespace mactune::testing {

struct BenchmarkPoint {
  int context = 32768, batch = 1, group = 8;  // group: GQA, 32 / group KV heads
  double hit = 0.0;
  bool mac = true;  // false: the full-attention baseline (one segment a group)
  bool skewed = false;
};

inline std::vector<GroupSpan> benchmark_step(const BenchmarkPoint& pt, std::uint64_t seed,
                                             int band = 256) {
  std::mt19937_64 rng(seed);
  const int kv_heads = 32 / pt.group, units = pt.batch * 32;
  std::vector<int> order(static_cast<std::size_t>(units));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<char> hit(static_cast<std::size_t>(units), 0);
  const int quota = static_cast<int>(std::lround(pt.hit * units));
  for (int i = 0; i < quota; ++i)
    hit[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = 1;
  std::uniform_int_distribution<int> lag(1, 64);
  std::vector<GroupSpan> spans;
  for (int b = 0; b < pt.batch; ++b) {
    const int kv_len = pt.skewed
                           ? std::uniform_int_distribution<int>(pt.context / 4, pt.context)(rng)
                           : pt.context;
    const int m = kv_len - 1, ce = cache_end(m, band);
    for (int h = 0; h < kv_heads; ++h) {
      GroupSpan g{b, h, 0, kv_len, kv_len};
      if (pt.mac) {
        int begin = ce;
        for (int j = 0; j < pt.group; ++j) {
          const int u = b * 32 + h * pt.group + j;
          const int start = hit[static_cast<std::size_t>(u)] ? cache_end(m - lag(rng), band) : 0;
          begin = std::min(begin, start);
        }
        g.begin = begin;
        g.cache_end = ce;
      }
      spans.push_back(g);
    }
  }
  return spans;
}

inline std::vector<GroupSpan> skewed_step(std::mt19937_64& rng, double sigma, int batch,
                                          int kv_heads = 8, int group = 4, int band = 256) {
  std::uniform_real_distribution<double> log_ctx(std::log(4096.0), std::log(262144.0));
  std::normal_distribution<double> skip(sigma, sigma);
  std::vector<GroupSpan> spans;
  for (int b = 0; b < batch; ++b) {
    const int kv_len = static_cast<int>(std::lround(std::exp(log_ctx(rng))));
    const int ce = cache_end(kv_len - 1, band);
    for (int h = 0; h < kv_heads; ++h) {
      GroupSpan g{b, h, ce, ce, kv_len};
      for (int j = 0; j < group; ++j) {
        const double ratio = std::clamp(skip(rng), 0.0, 1.0);
        g.begin = std::min(g.begin, std::min(static_cast<int>(ratio * kv_len), ce));
      }
      spans.push_back(g);
    }
  }
  return spans;
}

}  // namespace mactune::testing
