// The per-phase summary `mactune profile` prints: for each phase, how long it ran per step (the
// union over threads of its spans: wall time, not thread time), the median, its share of the step,
// and the thread time; the per-kernel GPU time per step; and the modeled bytes of each step
// (kernels/stats.h StepStats).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "kernels/stats.h"
#include "profiler/activity.h"
#include "profiler/cpu_tracer.h"

namespace mactune::prof {

// One measured decode step, as the loop timed it.
struct StepSample {
  std::int64_t start_ns = 0, end_ns = 0;
  StepStats stats;
  double ms() const { return double(end_ns - start_ns) * 1e-6; }
};

struct PhaseStat {
  std::string name;
  int steps_present = 0;    // steps in which the phase ran at all
  double mean_wall_us = 0;  // mean over all steps of the union of its spans within the step
  double p50_wall_us = 0;
  double mean_thread_us = 0;  // mean over steps of the sum of its spans (all threads)
  double share = 0;           // mean_wall / mean step time
  double spans_per_step = 0;
};

struct KernelStat {
  std::string name;
  double per_step = 0;  // launches per step
  double mean_us = 0;   // mean duration of one execution
  double p50_us = 0;
  double gpu_us_per_step = 0;
};

struct ProfileSummary {
  int steps = 0;
  double mean_step_us = 0, p50_step_us = 0, min_step_us = 0;
  std::vector<PhaseStat> phases;    // in kernels/phase.h order, `step` excluded
  std::vector<KernelStat> kernels;  // by GPU time per step, largest first
  double gpu_busy_share = 0;        // union of device activity within steps / step time
  // Means over steps of StepStats (bytes per step).
  double kv_bytes_read = 0, ring_bytes_read = 0, bytes_written = 0, modeled_bytes = 0;
  double skip_ratio = 0, head_skip_ratio = 0;
  double hit_heads = 0, eligible_heads = 0;
};

// Phase spans and device operations are assigned to the step whose [start, end] holds their
// start (device operations: the start of the API call that launched them, as they may run after
// the host has moved on). Steps must be in time order and not overlap.
ProfileSummary summarize(const std::vector<ThreadSpans>& threads,
                         const std::vector<StepSample>& steps, const ActivityLog& activity = {});

// A fixed-width table: one line per phase, then kernels, then the modeled bytes per step.
void print_summary(std::ostream& out, const ProfileSummary& summary);

// Median of a non-empty list (the mean of the two middle values for an even count).
double median(std::vector<double> values);

}  // namespace mactune::prof
