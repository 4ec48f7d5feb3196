#include "tuner/search/halving.h"

#include <algorithm>
#include <numeric>

#include "kernels/error.h"

namespace mactune::tuner {

HalvingStep halving_step(std::span<const HalvingScore> scores, double tie_tolerance,
                         bool honor_ties) {
  const std::size_t n = scores.size();
  HalvingStep step;
  if (n <= 1) {
    step.keep.resize(n);
    std::iota(step.keep.begin(), step.keep.end(), std::size_t{0});
    step.last = true;
    return step;
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return scores[a].score < scores[b].score; });
  double best_tie = scores[0].tie_score;
  for (const HalvingScore& s : scores) best_tie = std::min(best_tie, s.tie_score);
  std::vector<bool> keep(n, false);
  for (std::size_t k = 0; k < (n + 1) / 2; ++k) keep[order[k]] = true;
  std::size_t tied = 0;
  for (std::size_t i = 0; i < n && honor_ties; ++i)
    if (scores[i].tie_score <= best_tie * (1.0 + tie_tolerance)) keep[i] = true, ++tied;
  for (std::size_t i = 0; i < n; ++i)
    if (keep[i]) step.keep.push_back(i);
  step.last =
      step.keep.size() == 1 || step.keep.size() == n || (tied == step.keep.size() && tied > 1);
  return step;
}

int halving_samples(int first, int round, int max_samples) {
  MACTUNE_CHECK(first >= 1 && round >= 0 && max_samples >= 1, "halving_samples(", first, ", ",
                round, ", ", max_samples, ")");
  long long s = first;
  for (int i = 0; i < round && s < max_samples; ++i) s *= 2;
  return static_cast<int>(std::min<long long>(s, max_samples));
}

}  // namespace mactune::tuner
