// The kernels of a decode step that have no tuning knobs, compiled once: prepare (RoPE, q~,
// KV append) and the synthetic prefill. The device planner is plan_kernel.cu.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/params.h"
#include "kernels/forced.h"

namespace mactune::cuda {
namespace {

template <class T>
__device__ __forceinline__ T* typed(void* p) {
  return static_cast<T*>(p);
}

// Element offset of (slot, position, KV head) in a paged pool.
__device__ __forceinline__ long long kv_offset(const KvCache& kv, int slot, int pos, int g) {
  const int page =
      kv.page_table[static_cast<long long>(slot) * kv.pages_per_request + pos / kv.page_size];
  return static_cast<long long>(page) * kv.stride_page +
         static_cast<long long>(g) * kv.stride_head +
         static_cast<long long>(pos % kv.page_size) * kv.stride_token;
}

// Grid (n, q_heads + kv_heads), D/2 threads: thread i rotates the pair (i, i + D/2) exactly as
// kernels/rope.h does (angles and products in double; no FMA contraction), then rounds.
template <class T>
__global__ void prepare_kernel(const __grid_constant__ PrepareParams p) {
  const int row = static_cast<int>(blockIdx.x), hd = static_cast<int>(blockIdx.y);
  const int i = static_cast<int>(threadIdx.x), half = p.head_dim / 2;
  const StepRow r = p.rows[row];
  const double inv_freq = pow(p.rope_theta, -2.0 * i / p.head_dim);
  double sn, cs;
  sincos(static_cast<double>(r.m) * inv_freq, &sn, &cs);
  if (hd < p.q_heads) {
    const long long at = (static_cast<long long>(row) * p.q_heads + hd) * p.head_dim;
    const double x0 = p.q_in[at + i], x1 = p.q_in[at + i + half];
    T* qr = typed<T>(p.q_ring_out) + at;
    qr[i] = from_float<T>(static_cast<float>(x0));
    qr[i + half] = from_float<T>(static_cast<float>(x1));
    p.q_rot_out[at + i] = static_cast<float>(__dsub_rn(__dmul_rn(x0, cs), __dmul_rn(x1, sn)));
    p.q_rot_out[at + i + half] =
        static_cast<float>(__dadd_rn(__dmul_rn(x1, cs), __dmul_rn(x0, sn)));
  } else {
    const int g = hd - p.q_heads;
    const long long at = (static_cast<long long>(row) * p.kv_heads + g) * p.head_dim;
    const double x0 = p.k_in[at + i], x1 = p.k_in[at + i + half];
    const long long off = kv_offset(p.kv, r.slot, r.m, g);
    T* k = typed<T>(p.kv.k) + off;
    T* v = typed<T>(p.kv.v) + off;
    k[i] = from_float<T>(static_cast<float>(__dsub_rn(__dmul_rn(x0, cs), __dmul_rn(x1, sn))));
    k[i + half] =
        from_float<T>(static_cast<float>(__dadd_rn(__dmul_rn(x1, cs), __dmul_rn(x0, sn))));
    v[i] = from_float<T>(p.v_in[at + i]);
    v[i + half] = from_float<T>(p.v_in[at + i + half]);
  }
}

// Uniform value in (-1, 1), never 0, from a 64-bit hash.
__device__ __forceinline__ float unit_value(std::uint64_t h) {
  return (static_cast<float>((h >> 40) & 0xffffff) + 0.5f) * (2.0f / 16777216.0f) - 1.0f;
}

template <class T>
__global__ void synthetic_kv_kernel(const __grid_constant__ SyntheticParams p) {
  const long long total = static_cast<long long>(p.len) * p.kv_heads * p.head_dim;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(e % p.head_dim);
    const int g = static_cast<int>((e / p.head_dim) % p.kv_heads);
    const int pos = static_cast<int>(e / (static_cast<long long>(p.head_dim) * p.kv_heads));
    const long long off = kv_offset(p.kv, p.slot, pos, g) + d;
    const std::uint64_t h = ::mactune::detail::splitmix64(
        p.seed ^ ::mactune::detail::splitmix64(static_cast<std::uint64_t>(e)));
    typed<T>(p.kv.k)[off] = from_float<T>(unit_value(h));
    typed<T>(p.kv.v)[off] = from_float<T>(unit_value(::mactune::detail::splitmix64(h)));
  }
}

// Every slot of the request's ring: the position in [len - K, len) it holds (pos = -1 when
// none), random q~ and summary o, lse ~ ln(cache_end(pos)) (empty below the band).
template <class T>
__global__ void synthetic_ring_kernel(const __grid_constant__ SyntheticParams p) {
  const int K = p.ring.capacity;
  const long long total = static_cast<long long>(K) * p.q_heads * p.head_dim;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(e % p.head_dim);
    const int h = static_cast<int>((e / p.head_dim) % p.q_heads);
    const int sl = static_cast<int>(e / (static_cast<long long>(p.head_dim) * p.q_heads));
    const int last = p.len - 1;  // the newest position; slot sl holds the newest pos == sl mod K
    const int newest = last - ((last - sl) % K + K) % K;
    const int pos = newest >= 0 ? newest : -1;
    const long long at = (static_cast<long long>(p.slot) * p.q_heads + h) * K + sl;
    const std::uint64_t hash = ::mactune::detail::splitmix64(
        ~p.seed ^ ::mactune::detail::splitmix64(static_cast<std::uint64_t>(e)));
    typed<T>(p.ring.q)[at * p.head_dim + d] = from_float<T>(unit_value(hash));
    const int ce = pos >= 0 ? cache_end(pos, p.band) : 0;
    const float o = ce > 0 ? unit_value(::mactune::detail::splitmix64(hash)) : 0.0f;
    if (p.ring.summary_dtype == DType::f32)
      static_cast<float*>(p.ring.o)[at * p.head_dim + d] = o;
    else
      static_cast<bf16_t*>(p.ring.o)[at * p.head_dim + d] = float_to_bf16(o);
    if (d == 0)
      p.ring.lse[at] = ce > 0 ? logf(static_cast<float>(ce)) + 0.25f * unit_value(hash >> 7)
                              : -__builtin_huge_valf();
    if (d == 0 && h == 0) p.ring.pos[static_cast<long long>(p.slot) * K + sl] = pos;
  }
}

__global__ void probe_kernel(int* out) {
  if (out != nullptr) *out = 1;
}

}  // namespace

cudaError_t launch_prepare(const PrepareParams& p, int n, cudaStream_t stream) {
  if (n < 1) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(p.q_heads + p.kv_heads));
  const unsigned threads = static_cast<unsigned>(p.head_dim / 2);
  if (p.kv_dtype == DType::bf16)
    prepare_kernel<bf16_t><<<grid, threads, 0, stream>>>(p);
  else if (p.kv_dtype == DType::f16)
    prepare_kernel<f16_t><<<grid, threads, 0, stream>>>(p);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_synthetic(const SyntheticParams& p, cudaStream_t stream) {
  if (p.len < 1) return cudaSuccess;
  const unsigned threads = 256, blocks = 4096;
  if (p.kv_dtype == DType::bf16) {
    synthetic_kv_kernel<bf16_t><<<blocks, threads, 0, stream>>>(p);
    if (p.ring.q != nullptr) synthetic_ring_kernel<bf16_t><<<blocks, threads, 0, stream>>>(p);
  } else if (p.kv_dtype == DType::f16) {
    synthetic_kv_kernel<f16_t><<<blocks, threads, 0, stream>>>(p);
    if (p.ring.q != nullptr) synthetic_ring_kernel<f16_t><<<blocks, threads, 0, stream>>>(p);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t probe_kernel_image() {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, probe_kernel);
}

}  // namespace mactune::cuda
