// The pruned match of `match_mode = pruned` (detail/match_pruned.cuh) for every head_dim and
// 16-bit KV dtype the session runs, and the sketch kernel that keeps each ring entry's 4-bit
// copy current. Compiled once: neither has tuning knobs.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/detail/match_pruned.cuh"
#include "kernels/cuda/launchers.h"

namespace mactune::cuda {
namespace {

// One thread per ring entry: the step's new entries (p.rows), or every entry of p.slots slots.
template <class S>
__global__ void sketch_kernel(const __grid_constant__ SketchParams p) {
  const long long K = p.capacity;
  const long long entries = p.rows != nullptr ? static_cast<long long>(p.n) * p.q_heads
                                              : static_cast<long long>(p.slots) * p.q_heads * K;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < entries;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long at = static_cast<long long>(p.slot) * p.q_heads * K + e;
    if (p.rows != nullptr) {
      const StepRow r = p.rows[e / p.q_heads];
      at = (static_cast<long long>(r.slot) * p.q_heads + e % p.q_heads) * K + r.m % K;
    }
    detail::quantize_entry(static_cast<const S*>(p.ring_q) + at * p.head_dim, p.head_dim,
                           p.codes + at * (p.head_dim / 2), p.scale + at, p.c2 + at, p.err + at);
  }
}

template <int D>
cudaError_t launch_pruned_d(const PrunedMatchParams& p, DType kv_dtype, cudaStream_t stream) {
  if (kv_dtype == DType::bf16) return launch_match_pruned<D, DType::bf16>(p, stream);
  if (kv_dtype == DType::f16) return launch_match_pruned<D, DType::f16>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_match_pruned(const PrunedMatchParams& p, int head_dim, DType kv_dtype,
                                cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      return launch_pruned_d<64>(p, kv_dtype, stream);
    case 128:
      return launch_pruned_d<128>(p, kv_dtype, stream);
    case 256:
      return launch_pruned_d<256>(p, kv_dtype, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t launch_sketch(const SketchParams& p, cudaStream_t stream) {
  if (p.ring_q == nullptr || p.codes == nullptr || p.scale == nullptr || p.c2 == nullptr ||
      p.err == nullptr || p.capacity < 1 || p.q_heads < 1 || p.head_dim < 2 || p.head_dim > 512 ||
      p.head_dim % 2 != 0)
    return cudaErrorInvalidValue;
  const long long entries = p.rows != nullptr
                                ? static_cast<long long>(p.n) * p.q_heads
                                : static_cast<long long>(p.slots) * p.q_heads * p.capacity;
  if (entries < 1) return cudaSuccess;
  constexpr unsigned kThreads = 128;
  const unsigned blocks =
      static_cast<unsigned>(std::min<long long>((entries + kThreads - 1) / kThreads, 1024));
  if (p.kv_dtype == DType::bf16)
    sketch_kernel<bf16_t><<<blocks, kThreads, 0, stream>>>(p);
  else if (p.kv_dtype == DType::f16)
    sketch_kernel<f16_t><<<blocks, kThreads, 0, stream>>>(p);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace mactune::cuda
