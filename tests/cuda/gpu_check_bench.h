// What mactune_gpu_check measures, behind one interface with two implementations: the GPU
// (cuda::Session steps timed with device events) and a dry one that runs nowhere and returns
// placeholder numbers of the same shape. The sections (gpu_check_sections.cpp) decide what to
// measure and write the records from either, so the dry run (scripts/gpu-check.sh --dry-run)
// checks the report against records written by the very code a lease runs.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/session.h"

namespace mactune::cuda::check {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

struct DeviceInfo {
  std::string name, arch, runtime;
  int sms = 0;
  long long memory_mib = 0;
  double l2_mib = kNotMeasured;
};

// One session's step, sampled: the median device time and the spread (p75 - p25) / median,
// the phase medians (EngineConfig::time_phases), what it read and how it was planned.
struct StepTimes {
  double ms = kNotMeasured, spread = kNotMeasured;
  double match_ms = kNotMeasured, plan_ms = kNotMeasured, attend_ms = kNotMeasured;
  long long modeled_bytes = 0;
  double skip = kNotMeasured;
  PlanChoice plan{};
  std::string instance;
};

// Full attention and MAC over the same KV (the same prefill seeds), their samples interleaved
// (one run, one clock state), at each forced hit rate. `mac` has forced hits enabled; the full
// session is derived from it (MAC and forced hits off, engine.full kept).
struct PairSpec {
  SessionOptions mac;
  int context = 0;
  std::vector<double> hits;
  int warmup = 3, samples = 15;
};
struct PairResult {
  double hit = 0;
  StepTimes full, mac;
};

// One session's step again and again; flush_l2 writes a buffer of several L2 sizes before each
// sample (outside the timed kernels), so what the step reads comes from DRAM.
struct SingleSpec {
  SessionOptions options;
  int context = 0;
  int warmup = 3, samples = 15;
  bool flush_l2 = false;
};

// MAC at forced hit 0 against full attention on the same seeds: every output of `steps`
// advancing steps, outputs and partials NaN-poisoned before each (EngineConfig::poison).
struct CompareSpec {
  SessionOptions mac;
  int context = 0;
  int steps = 3;
};
struct CompareResult {
  double rel_l2 = kNotMeasured;   // ||mac - full|| / ||full|| over every output
  double max_abs = kNotMeasured;  // max |mac - full|
  bool finite = false;            // every output of both written and finite
};

class Bench {
 public:
  virtual ~Bench() = default;
  virtual bool dry() const = 0;
  virtual DeviceInfo device() = 0;
  // Device-to-device copy of `bytes`, bytes read + written over event time (median).
  virtual double copy_gbs(std::size_t bytes, int repeats) = 0;
  virtual std::vector<PairResult> pair(const PairSpec& spec) = 0;
  virtual StepTimes single(const SingleSpec& spec) = 0;
  virtual CompareResult compare(const CompareSpec& spec) = 0;
  // Resident CTAs an SM of the named full or attend instance (occupancy query); -1: unknown.
  virtual int ctas_per_sm(const std::string& instance) = 0;
};

std::unique_ptr<Bench> gpu_bench();  // throws mactune::Error without a usable GPU
std::unique_ptr<Bench> dry_bench();

// The full-attention session of a pair: MAC and forced hits off, everything else as `mac`.
SessionOptions full_options(const SessionOptions& mac);

// "uniform 12 items" / "balanced 400 items".
std::string plan_text(const PlanChoice& c);

}  // namespace mactune::cuda::check
