#include "tuner/spec/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mactune::tuner {

double quantile_sorted(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0.0;
  const double h = p * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

TimeStats summarize(std::span<const double> samples) {
  TimeStats s;
  if (samples.empty()) return s;
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  s.samples = static_cast<int>(v.size());
  s.min_s = v.front();
  s.max_s = v.back();
  s.median_s = quantile_sorted(v, 0.5);
  s.q1_s = quantile_sorted(v, 0.25);
  s.q3_s = quantile_sorted(v, 0.75);
  s.mean_s = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean_s) * (x - s.mean_s);
    s.stdev_s = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  std::vector<double> dev(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) dev[i] = std::fabs(v[i] - s.median_s);
  std::sort(dev.begin(), dev.end());
  const double mad = quantile_sorted(dev, 0.5);
  s.rel_noise = s.median_s > 0 ? 1.4826 * mad / s.median_s : 0.0;
  return s;
}

void Convergence::add(double seconds) {
  samples_.push_back(seconds);
  sampled_ += seconds;
  noise_history_.push_back(summarize(samples_).rel_noise);
}

bool Convergence::noise_ok() const {
  return !noise_history_.empty() && noise_history_.back() <= policy_.noise;
}

// The noise estimate has stopped moving: more samples would not bring it under the target
// (nvbench's stdrel criterion exits the same way instead of running to the timeout).
bool Convergence::stabilised() const {
  const auto w = static_cast<std::size_t>(std::max(policy_.stable_window, 2));
  if (noise_history_.size() < w) return false;
  const auto first = noise_history_.end() - static_cast<std::ptrdiff_t>(w);
  const auto [lo, hi] = std::minmax_element(first, noise_history_.end());
  return *hi - *lo <= policy_.stable_drift * noise_history_.back();
}

bool Convergence::done() const {
  const int n = static_cast<int>(samples_.size());
  if (n >= policy_.max_samples) return true;
  if (n < policy_.min_samples || sampled_ < policy_.min_time) return false;
  return noise_ok() || stabilised();
}

StopReason Convergence::reason() const {
  const int n = static_cast<int>(samples_.size());
  if (n >= policy_.min_samples && sampled_ >= policy_.min_time) {
    if (noise_ok()) return StopReason::noise;
    if (stabilised()) return StopReason::stable;
  }
  if (n >= policy_.max_samples) return StopReason::max_samples;
  return StopReason::time_cap;
}

}  // namespace mactune::tuner
