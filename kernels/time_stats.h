// Sample statistics of one measured side, in seconds: the one type the tuner computes
// (tuner/spec/stats.h), the database stores (db/store.h) and decisions compare
// (tuner/decide/decide.h).
#pragma once

namespace mactune {

// Everything but stdev_s is stored with each measurement.
struct TimeStats {
  int samples = 0;
  double median_s = 0, q1_s = 0, q3_s = 0;  // quartiles by linear interpolation (Hyndman-Fan 7)
  double min_s = 0, max_s = 0, mean_s = 0;
  double stdev_s = 0;  // sample standard deviation (n - 1)
  // Relative noise: 1.4826 MAD / median, a robust estimate of stdev / median that one
  // descheduled sample on a shared machine cannot blow up (nvbench uses stdev / mean).
  double rel_noise = 0;

  double iqr_s() const { return q3_s - q1_s; }
};

}  // namespace mactune
