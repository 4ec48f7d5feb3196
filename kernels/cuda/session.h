// mactune::cuda::Session: a decode session of one layer on the GPU, with the API of
// mactune::cpu::Session (kernels/cpu/session.h), so the tuner, profiler and replay drive either.
//
// A step is five kernels on the session's stream, with no host synchronization in between:
//   prepare  RoPE of q and k, q~ in the KV dtype, the new K/V token appended (paged pools)
//   match    ring scan + decisions (forced hits applied on the device)     [MAC only]
//   plan     group spans -> chunk -> work items (kernels/plan.h on the device)
//   attend   split-KV partial states over the items (full: the baseline instance)
//   merge    partials (+ ring summary) -> output, and the new ring entry   [ring: MAC only]
// framed by one host-to-device copy of the inputs and one device-to-host copy of the results,
// so a whole step is capturable as a CUDA graph (EngineConfig::graph) and replays unchanged.
//
// Without a usable GPU the constructor throws mactune::Error with gpu_status()'s reason.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/device.h"
#include "kernels/cuda/engine_config.h"
#include "kernels/instance.h"
#include "kernels/plan.h"
#include "kernels/session.h"

namespace mactune::cuda {

using SessionOptions = mactune::SessionOptions<EngineConfig>;

// The CUDA engine; it satisfies the session contract (kernels/session.h, DecodeSession).
class Session {
 public:
  using Engine = EngineConfig;
  using Result = StepResult;
  // One ring entry read back from the device (tests).
  struct RingEntry {
    int pos = -1;
    std::vector<float> q, o;  // q~ and the summary o, as float
    float lse = 0.0f;
  };

  explicit Session(const SessionOptions& options);  // validates; allocates everything up front
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  int add_request();  // throws InputError when all shape.batch slots are taken
  void release_request(int id);
  int length(int id) const;  // tokens in its KV = the next position m

  // One decode step for requests[0..n) (distinct ids): pre-RoPE q [n, Hq, D], k and v
  // [n, Hkv, D], fp32. Appends KV at m = length(id), runs MAC (or full attention), writes the
  // ring entry; synchronizes before returning. advance = false leaves the positions (and the
  // forced-hit step counter) where they were: the same step can be timed again and again.
  const Result& step(std::span<const int> requests, std::span<const float> q,
                     std::span<const float> k, std::span<const float> v, bool advance = true);
  // The same, writing the outputs into `out` [n, Hq, D] instead of Result::out (left empty).
  const Result& step_into(std::span<const int> requests, std::span<const float> q,
                          std::span<const float> k, std::span<const float> v, std::span<float> out,
                          bool advance = true);
  // The same step on inputs and outputs already on this session's device (e.g. a framework's
  // CUDA tensors): q_device [n, Hq, D], k_device and v_device [n, Hkv, D] fp32, read in place
  // by the kernels, and the outputs written to out_device [n, Hq, D] (Result::out stays empty);
  // only the step's metadata and its decisions cross to and from the host. The step waits for
  // the work already queued on `producer_stream` (a cudaStream_t; nullptr: the legacy default
  // stream), i.e. for whatever wrote q, k, v, and returns when it is complete. Never captured
  // as a graph, since its pointers change from call to call.
  const Result& step_device(std::span<const int> requests, const float* q_device,
                            const float* k_device, const float* v_device, float* out_device,
                            void* producer_stream = nullptr, bool advance = true);
  // Enqueues a step without waiting (inputs are copied before it returns); wait() finishes it.
  void step_async(std::span<const int> requests, std::span<const float> q, std::span<const float> k,
                  std::span<const float> v, bool advance = true);
  const Result& wait();

  // Device time of the last finished step's kernels, from CUDA events (no copies, no host).
  double last_step_ms() const;
  // With EngineConfig::time_phases: device time of each kernel of the last step, in order.
  std::vector<std::pair<Phase, double>> last_phase_ms() const;
  // The last step's plan (kernels/plan.h: kind, chunk of a uniform plan, items, dispatch
  // entries, predicted makespan), its items and chunk (0: a balanced plan), and the CTA budget
  // it was planned for.
  PlanChoice last_plan() const;
  int last_items() const;
  int last_chunk() const;
  int plan_budget() const;

  // Benchmark setup without computing attention: `len` tokens of random KV (never zeros) and
  // valid, non-empty ring entries for the last K positions (random q~ and o, lse ~ ln cache_end).
  void prefill_synthetic(int id, int len, std::uint64_t seed);
  // Changes between steps without touching the KV cache or the rings, so one prefilled session
  // serves a sweep: the forced-hit mode, and the engine (instances and launch parameters;
  // captured graphs are dropped). Invalid values throw InputError like the constructor.
  void set_forced(const ForcedHits& forced);
  void set_engine(const EngineConfig& engine);

  // The step's main instance: the attend instance (MAC) or the full instance (baseline).
  std::string instance_name() const;
  // Every instance a step runs, in launch order.
  std::vector<std::string> instance_names() const;
  RingEntry ring_entry(int id, int head, int pos) const;
  const SessionOptions& options() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

static_assert(DecodeSession<Session>);

// Every CUDA instance this binary holds (registry.h), described.
std::vector<InstanceDesc> instances();

}  // namespace mactune::cuda
