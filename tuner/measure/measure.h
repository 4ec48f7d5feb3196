// Measurement: the interfaces every backend implements (a timer, a runnable case, the backend
// itself) and the sampler that measures a MAC candidate and its full-attention baseline
// interleaved, as nvbench measures one state (DESIGN.md section 3, STYLE.md 7):
//
//   - warm-up runs apart from the samples;
//   - cold mode: the backend flushes its caches (CPU: a buffer larger than the LLC; GPU: L2)
//     before every sample, outside the timed region;
//   - samples alternate between the two sides in ABBA order, so drift (thermal, a neighbour's
//     load) hits both alike and the speedup is a ratio from one run;
//   - each side stops on its own once its relative noise is under the target (or stabilised)
//     after min_samples and min_time, or at max_samples; the point stops at the time cap.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/device.h"
#include "kernels/instance.h"
#include "kernels/stats.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/spec.h"
#include "tuner/spec/stats.h"

namespace mactune::tuner {

// Times one region of work. CPU: the steady clock around the call. CUDA: events recorded on
// the stream around the kernels (launch latency kept out), or CUPTI kernel durations.
class SampleTimer {
 public:
  virtual ~SampleTimer() = default;
  virtual Timer kind() const = 0;
  virtual void start() = 0;
  virtual double stop() = 0;  // seconds since start()
};

// The host steady clock.
class SteadyTimer final : public SampleTimer {
 public:
  Timer kind() const override { return Timer::steady_clock; }
  void start() override;
  double stop() override;

 private:
  std::int64_t t0_ns_ = 0;
};

// One side of a point, set up and ready to run the same decode step again and again.
class Case {
 public:
  virtual ~Case() = default;
  virtual std::string instance() const = 0;  // canonical instance name
  virtual void run() = 0;                    // one untimed step (warm-up)
  virtual double sample() = 0;               // one timed step: seconds by the backend's timer
  // Whether the last sample was disturbed from outside (CPU: a thread of the process was
  // preempted while it ran; GPU: the clocks were throttled). Disturbed samples are discarded,
  // as nvbench discards throttled ones, up to max_samples of them per case.
  virtual bool disturbed() const { return false; }
  virtual StepStats stats() const = 0;  // of the last step: modeled bytes, skip ratio
};

// Clock state around a point, where the platform exposes it.
struct ClockState {
  std::optional<double> mhz;  // mean core / SM clock
  int throttled_samples = 0;  // disturbed samples (preempted / throttled), discarded or kept
  std::string note;           // how it was read, or why it was not
};

class MeasureBackend {
 public:
  virtual ~MeasureBackend() = default;
  virtual Backend kind() const = 0;
  virtual DeviceFingerprint device() const = 0;
  // The timer samples are taken with (part of every point's identity).
  virtual Timer timer() const = 0;
  // Selects the timer (none: the backend's default); InputError when this backend or build
  // does not have it.
  virtual void use_timer(std::optional<Timer> timer) = 0;
  virtual std::vector<InstanceDesc> instances() const = 0;
  // Canonical names of the {MAC, full} instances a point runs, without building anything.
  virtual std::pair<std::string, std::string> instance_names(const TunePoint& p) const = 0;
  // "" when this backend can run the point, else why not (recorded as a failed point).
  virtual std::string can_run(const TunePoint& p) const = 0;
  // Bytes free for new cases (host memory, or device memory), 0 when unknown.
  virtual double memory_available() const = 0;
  // Bytes one side of a point holds (KV pools, ring), roughly; 0 when unknown.
  virtual double case_bytes(const TunePoint& p, bool mac) const = 0;
  // Builds one side of a point: the session, its synthetic KV and ring, the step's inputs.
  virtual std::unique_ptr<Case> make_case(const TunePoint& p, bool mac, std::uint64_t seed) = 0;
  // Evicts the caches before a cold sample (not timed).
  virtual void flush_caches() = 0;
  virtual ClockState clock_begin() = 0;  // called before the first sample of a point
  virtual ClockState clock_end() = 0;    // and after the last: the state over the point
};

// Results of one side of a point.
struct SideResult {
  std::string instance;
  TimeStats time;
  std::vector<double> samples;  // every kept sample, in order (seconds)
  StopReason stop = StopReason::noise;
  StepStats stats;
};

struct PairResult {
  SideResult mac, full;
  ClockState clock;
  double wall_seconds = 0;  // warm-up, flushes and samples included
};

// Set from a signal handler: the sampler stops between two samples and throws Interrupted.
struct Interrupted : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

struct GroupResult {
  std::vector<SideResult> sides;  // one per case, in order
  ClockState clock;
  int discarded = 0;  // disturbed samples thrown away
  double wall_seconds = 0;
};

// Measures several cases interleaved: round k samples them in rotated order starting at case
// k mod n, so each takes every position equally often (ABBA for two). Every case stops on its
// own rule; the group stops at `time_cap` seconds of wall time once every case has 3 samples.
// `stop_flag` (may be null) is polled between samples: Interrupted is thrown when it is set.
// `prior` (empty, or one list per case): samples a case already has from an earlier call
// (successive halving adds to a config's samples round by round); they count towards its
// stopping rule and its summary.
GroupResult measure_group(MeasureBackend& backend, std::span<Case* const> cases,
                          const MeasurePolicy& policy, double time_cap,
                          const std::atomic<bool>* stop_flag = nullptr,
                          std::span<const std::vector<double>> prior = {});

// Both sides of one point (measure_group of {full, mac} with the policy's time cap).
PairResult measure_pair(MeasureBackend& backend, Case& mac, Case& full, const MeasurePolicy& policy,
                        const std::atomic<bool>* stop_flag = nullptr);

// The backends of this build: "cpu" always; "cuda" when built with the CUDA kernels and a GPU
// is usable (else nullptr with `why` set).
std::unique_ptr<MeasureBackend> make_cpu_backend();
std::unique_ptr<MeasureBackend> make_cuda_backend(std::string* why);
// What this build knows of the CUDA backend without a GPU (a dry run or job scripts on a
// cluster's login node): its compiled instances, and the {MAC, full} instance names a point
// runs. Empty / the spec's names as given in a build without the CUDA kernels.
std::vector<InstanceDesc> cuda_build_instances();
std::pair<std::string, std::string> cuda_instance_names(const TunePoint& p);
// The backend asked for: cpu, cuda (InputError when unusable here) or auto (none: cuda when
// usable, else cpu).
std::unique_ptr<MeasureBackend> make_backend(BackendRequest requested);

}  // namespace mactune::tuner
