// The profiled decode loop: warm-up steps (not recorded), then `steps` measured steps, each
// timed on the profiler clock, inside one registered NVTX range "measure" (the capture range of
// `nsys -c nvtx`), with device activity collected around the measured steps only and (CUDA
// backend) cudaProfilerStart/Stop around them for `nsys --capture-range=cudaProfilerApi`.
// Works with any session of the step contract (kernels/session.h, StepSession: the CPU and CUDA
// engines); the session reports its phases, the step included, to the sink it was built with.
// Step i's inputs are synthetic_step() of step_seed(seed, i): the tuner's generator.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/forced.h"
#include "kernels/phase.h"
#include "kernels/problem.h"
#include "kernels/session.h"
#include "profiler/activity.h"
#include "profiler/clock.h"
#include "profiler/cpu_tracer.h"
#include "profiler/nsys.h"
#include "profiler/nvtx.h"
#include "profiler/summary.h"

namespace mactune::prof {

struct LoopOptions {
  int steps = 16;
  int warmup = 2;
  std::uint64_t seed = 1;
  bool cuda_profiler_range = false;  // cudaProfilerStart/Stop around the measured steps
  // Checked between steps: when it turns true the loop stops early and returns the steps it
  // measured (SIGINT during `mactune profile` still writes the trace).
  const std::atomic<bool>* stop = nullptr;
};

struct LoopResult {
  std::vector<StepSample> steps;
  std::int64_t loop_tid = 0;  // the thread that ran the loop (its track holds the step spans)
  std::string instance;       // the session's instance name
};

// Pre-RoPE q [n, Hq, D] and new k, v [n, Hkv, D] of step `step` of a loop seeded with `seed`:
// kernels/session.h's synthetic_step(), the same for a given (seed, step) on every backend.
inline StepInputs make_step_inputs(const Problem& shape, int n, std::uint64_t seed, int step) {
  return synthetic_step(shape, n, step_seed(seed, step));
}

// cudaProfilerStart in the constructor and cudaProfilerStop in the destructor when `enabled`
// (and this build has CUDA); nothing otherwise.
class CudaProfilerRange {
 public:
  explicit CudaProfilerRange(bool enabled);
  ~CudaProfilerRange();
  CudaProfilerRange(const CudaProfilerRange&) = delete;
  CudaProfilerRange& operator=(const CudaProfilerRange&) = delete;

 private:
  bool started_ = false;
};

template <StepSession Session>
LoopResult run_decode_loop(Session& session, std::span<const int> requests, const Problem& shape,
                           const LoopOptions& options, CpuPhaseTracer& tracer,
                           ActivityCollector& activity) {
  const int n = static_cast<int>(requests.size());
  const int total = options.warmup + options.steps;
  auto stopped = [&] { return options.stop && options.stop->load(std::memory_order_relaxed); };
  // Made up front: the RNG stays out of the measured steps. A stop request is honoured here
  // too (many steps take seconds to draw): the loop then measures nothing.
  std::vector<StepInputs> inputs;
  inputs.reserve(static_cast<std::size_t>(total));
  for (int i = 0; i < total && !stopped(); ++i)
    inputs.push_back(make_step_inputs(shape, n, options.seed, i));

  LoopResult result;
  result.instance = session.instance_name();
  result.loop_tid = os_thread_id();
  tracer.register_thread("decode loop");
  tracer.set_recording(false);
  for (int i = 0; i < options.warmup && !stopped(); ++i) {
    const StepInputs& in = inputs[static_cast<std::size_t>(i)];
    session.step(requests, in.q, in.k, in.v, true);
  }
  tracer.set_recording(true);
  activity.start();
  {
    NvtxRange measure(kMeasureRange, -1, /*registered=*/true);
    CudaProfilerRange capture(options.cuda_profiler_range);
    for (int i = options.warmup; i < total && !stopped(); ++i) {
      const StepInputs& in = inputs[static_cast<std::size_t>(i)];
      StepSample sample;
      sample.start_ns = now_ns();
      sample.stats = session.step(requests, in.q, in.k, in.v, true).stats;
      sample.end_ns = now_ns();
      result.steps.push_back(sample);
    }
  }
  activity.stop();
  tracer.set_recording(false);
  return result;
}

}  // namespace mactune::prof
