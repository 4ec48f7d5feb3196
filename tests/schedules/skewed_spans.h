// Random, skewed decode steps for planner tests (issue 4): batch 1..64, each request's context
// log-uniform in [4K, 256K], each query head's skip ratio drawn from N(sigma, sigma) clipped to
// [0, 1]; a head's start is that share of kv_len, never past cache_end(m) (a hit at p starts at
// cache_end(p) <= cache_end(m)); a group begins at its heads' smallest start.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/plan.h"
#include "kernels/problem.h"

namespace mactune::sched::testing {

struct SkewedStep {
  std::vector<GroupSpan> groups;
  std::vector<std::vector<int>> head_starts;  // [groups][G]
};

struct SkewSpec {
  double sigma = 0.2;
  int batch = 16;
  int kv_heads = 8;
  int group_size = 4;
  int band = 256;  // r
  int min_context = 4096;
  int max_context = 262144;
};

inline SkewedStep skewed_step(std::mt19937_64& rng, const SkewSpec& s) {
  std::uniform_real_distribution<double> log_ctx(std::log(double(s.min_context)),
                                                 std::log(double(s.max_context)));
  std::normal_distribution<double> skip(s.sigma, s.sigma);
  SkewedStep step;
  for (int b = 0; b < s.batch; ++b) {
    const int kv_len = static_cast<int>(std::lround(std::exp(log_ctx(rng))));
    const int m = kv_len - 1;
    const int ce = cache_end(m, s.band);
    for (int h = 0; h < s.kv_heads; ++h) {
      GroupSpan g;
      g.batch_index = b;
      g.kv_head = h;
      g.cache_end = ce;
      g.kv_len = kv_len;
      g.begin = ce;
      std::vector<int> starts;
      for (int j = 0; j < s.group_size; ++j) {
        const double ratio = std::clamp(skip(rng), 0.0, 1.0);
        const int start = std::min(static_cast<int>(ratio * kv_len), ce);
        starts.push_back(start);
        g.begin = std::min(g.begin, start);
      }
      step.groups.push_back(g);
      step.head_starts.push_back(std::move(starts));
    }
  }
  return step;
}

}  // namespace mactune::sched::testing
