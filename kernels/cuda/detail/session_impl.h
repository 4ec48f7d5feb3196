// The private state of mactune::cuda::Session (session.cpp, session_step.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "kernels/cuda/check.h"
#include "kernels/cuda/params.h"
#include "kernels/cuda/registry.h"
#include "kernels/cuda/session.h"

namespace mactune::cuda::detail {

// Owning device allocation (cudaMalloc), zero-filled at creation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Owning page-locked host allocation (cudaMallocHost), for asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Byte offsets inside the per-step input block (header, rows, q, k, v) and the result block
// (out, decisions, guard flags, plan scalars) for n rows: one copy each way per step.
struct InLayout {
  std::size_t header = 0, rows = 0, q = 0, k = 0, v = 0, bytes = 0;
};
struct OutLayout {
  std::size_t out = 0, decisions = 0, guard = 0, scalars = 0, bytes = 0;  // scalars: StepScalars
};
// What the plan kernel reports back with the outputs.
struct StepScalars {
  PlanChoice choice;
  std::int32_t error = 0;  // the plan overflowed its arrays (a planner bug)
};
InLayout in_layout(int n, int q_heads, int kv_heads, int head_dim);
OutLayout out_layout(int n, int q_heads, int head_dim);

}  // namespace mactune::cuda::detail

namespace mactune::cuda {

struct Session::Impl {
  SessionOptions opt;
  int slots = 0, q_heads = 0, kv_heads = 0, head_dim = 0, group = 0;
  const AttendInstance* attend = nullptr;  // MAC
  const MatchInstance* match = nullptr;    // MAC
  const FullInstance* full = nullptr;      // baseline
  const MergeInstance* merge = nullptr;
  int sms = 0, ctas_per_sm = 0, match_ctas_per_sm = 0;
  std::int32_t budget = 0, capacity = 0;
  int pages_per_request = 0, max_match_tiles = 0;

  cudaStream_t stream = nullptr;
  cudaEvent_t ev_start = nullptr, ev_stop = nullptr;
  cudaEvent_t ev_producer = nullptr;  // step_device: the caller's stream, waited for
  std::vector<cudaEvent_t> ev_phase;  // after each kernel (time_phases)

  detail::DeviceBuffer k_pool, v_pool, page_table;
  detail::DeviceBuffer ring_q, ring_o, ring_lse, ring_pos;
  // match_mode = pruned: each ring entry's 4-bit sketch (params.h), written after every ring
  // write while `pruned` holds, rebuilt from the ring when the engine switches to it.
  detail::DeviceBuffer sk_codes, sk_scale, sk_c2, sk_err;
  bool pruned = false;
  detail::DeviceBuffer q_ring, q_rot, match_partials, match_best, counters;
  detail::DeviceBuffer spans, merge_plan, items, dispatch, work_counter, partial_o, partial_lse;
  detail::DeviceBuffer in_block, out_block;
  detail::PinnedBuffer in_host, out_host;

  std::vector<int> lengths;
  std::vector<char> used;
  std::uint64_t steps = 0;

  struct Pending {
    bool active = false;
    bool advance = true;
    std::vector<int> ids, positions;
    std::span<float> into;  // step_into: the caller's output buffer
    // step_device: the caller's device buffers (null for host steps).
    const float *dev_q = nullptr, *dev_k = nullptr, *dev_v = nullptr;
    float* dev_out = nullptr;
  } pending;
  Result result;
  std::map<int, cudaGraphExec_t> graphs;  // per batch size n
  std::vector<std::pair<Phase, double>> phase_ms;
  double step_ms = 0.0;
  int items_last = 0, chunk_last = 0;
  PlanChoice plan_last;

  explicit Impl(const SessionOptions& o);
  ~Impl();

  void configure(const EngineConfig& e);  // instances, budget and the buffers sized by them
  void check_id(int id) const;
  KvCache kv_cache() const;
  RingBuffers ring() const;
  // The sketch of ring entries (pruned only): the step's n rows, or (rows null) every entry of
  // slots [slot, slot + count).
  void sketch(const StepRow* rows, int n, int slot = 0, int count = 0);
  bool mac() const { return opt.mac_enabled; }

  // Stages the inputs in pinned memory and enqueues the step (graph or direct). With
  // `producer` set (step_device), q, k, v are device pointers the kernels read in place, the
  // step runs after the work queued on *producer, and never as a graph.
  void start(std::span<const int> requests, std::span<const float> q, std::span<const float> k,
             std::span<const float> v, bool advance, const cudaStream_t* producer = nullptr);
  // Enqueues copies and kernels of an n-row step on `stream`; `capturing` inside graph capture.
  void enqueue(int n, bool capturing);
  cudaGraphExec_t capture(int n);
  const Result& finish();
  void record(cudaEvent_t e, bool capturing) const;
};

}  // namespace mactune::cuda
