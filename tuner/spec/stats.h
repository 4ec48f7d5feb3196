// Sample statistics and the adaptive stopping rule of one measured point (nvbench's method,
// STYLE.md 7): warm-up apart, then samples until the relative noise is under the target or a
// cap is reached; summaries keep median, quartiles and min so decisions can use intervals.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/enum_names.h"
#include "kernels/fields.h"
#include "kernels/stop_reason.h"  // StopReason: why sampling stopped
#include "kernels/time_stats.h"

namespace mactune::tuner {

// Summarizes the samples (any order). Empty input gives an all-zero summary.
TimeStats summarize(std::span<const double> samples);

// Quantile p in [0, 1] of sorted values, linear interpolation between order statistics.
double quantile_sorted(std::span<const double> sorted, double p);

// How measuring a point stops. Every limit is in samples or seconds of wall time.
struct StoppingPolicy {
  int warmup = 2;             // untimed runs before the first sample (per candidate)
  int min_samples = 5;        // never stop before this many samples
  int max_samples = 50;       // never take more
  double noise = 0.02;        // stop once Summary::noise <= this (relative)
  double min_time = 0.0;      // and at least this much sampled time (seconds, per candidate)
  double time_cap = 5.0;      // wall seconds per point, warm-up and cache flushes included
  int stable_window = 8;      // the noise has "stabilised" when, over this many samples,
  double stable_drift = 0.1;  // it moved by less than this fraction of itself
};

}  // namespace mactune::tuner

// The spec's `measure` keys of the stopping rule (docs/spec.md). stable_drift is no row: it is
// the rule's own constant (docs/spec.md's "moved by < 10 %"), not a setting. max_samples >=
// min_samples is a check across rows (the spec reader's).
template <>
struct mactune::FieldTable<mactune::tuner::StoppingPolicy> {
  static const std::vector<Field<tuner::StoppingPolicy>>& fields() {
    using P = tuner::StoppingPolicy;
    static const std::vector<Field<P>> t = {
        field<&P::warmup>("warmup", "warmup", "untimed steps of each side before sampling")
            .range(0, 1000000),
        field<&P::min_samples>("min_samples", "min_samples",
                               "no side stops before this many samples")
            .range(1, 1000000),
        field<&P::max_samples>("max_samples", "max_samples", "no side takes more samples")
            .range(1, 1000000),
        field<&P::noise>("noise", "noise", "a side stops once its relative noise is this or less")
            .range(0),
        field<&P::min_time>("min_time", "min_time",
                            "... and its samples add up to at least this (seconds)")
            .range(0),
        field<&P::time_cap>("time_cap", "time_cap",
                            "wall seconds per point, warm-up and cache flushes included")
            .range(0)
            .open_below(),
        field<&P::stable_window>("stable_window", "stable_window",
                                 "samples over which a noise estimate that stopped moving stops")
            .range(2, 1000000),
    };
    return t;
  }
};

namespace mactune::tuner {

// Tracks one candidate's samples and says when it has enough. Feed samples in order.
class Convergence {
 public:
  explicit Convergence(const StoppingPolicy& policy) : policy_(policy) {}

  void add(double seconds);
  // Whether this candidate needs no more samples (ignores the wall-time cap, which the caller
  // owns because it spans the interleaved candidates of one point).
  bool done() const;
  StopReason reason() const;  // meaningful once done() or when the caller stops it
  const std::vector<double>& samples() const { return samples_; }
  double sampled_seconds() const { return sampled_; }
  double current_noise() const { return noise_history_.empty() ? 1.0 : noise_history_.back(); }

 private:
  bool noise_ok() const;
  bool stabilised() const;

  StoppingPolicy policy_;
  std::vector<double> samples_;
  std::vector<double> noise_history_;
  double sampled_ = 0;
};

}  // namespace mactune::tuner
