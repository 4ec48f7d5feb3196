// The CUDA device language for the host compiler (the simt build force-includes this into
// every kernel translation unit, as nvcc implicitly includes cuda_runtime.h): qualifiers,
// built-in variables, barriers, warp shuffles, atomics, fences, cache-hinted loads, the
// device math the kernels call, and `<<<...>>>` launches (rewritten by
// kernels/cuda/simt/transform.cmake into ::mactune::simt::launch(kernel, ...)(args)).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>

#include "kernels/cuda/simt/runtime.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __restrict__ __restrict
#define __align__(n) alignas(n)
// Static shared variables: one copy per program in the section the runtime watches; every block
// of every launch reuses it (blocks run one at a time).
#define __shared__ static __attribute__((section("simt_shared"), aligned(16)))

// Built-in variables: the running fiber's, set by the runtime at every switch.
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
inline constexpr int warpSize = 32;

__attribute__((always_inline)) inline void __syncthreads() {
  ::mactune::simt::dev::syncthreads();
}
__attribute__((always_inline)) inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::mactune::simt::dev::syncwarp(mask);
}
__attribute__((always_inline)) inline void __threadfence() {
  ::mactune::simt::dev::threadfence();
}
inline void __threadfence_block() {}

namespace mactune::simt::dev {
template <class T>
__attribute__((always_inline)) inline T shfl_as(Shfl kind, unsigned mask, T v, int arg, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move <= 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = shfl(kind, mask, bits, arg, width);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace mactune::simt::dev

template <class T>
__attribute__((always_inline)) inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::mactune::simt::dev::shfl_as(::mactune::simt::dev::Shfl::idx, mask, v, src, width);
}
template <class T>
__attribute__((always_inline)) inline T __shfl_up_sync(unsigned mask, T v, unsigned delta,
                                                       int width = 32) {
  return ::mactune::simt::dev::shfl_as(::mactune::simt::dev::Shfl::up, mask, v,
                                       static_cast<int>(delta), width);
}
template <class T>
__attribute__((always_inline)) inline T __shfl_down_sync(unsigned mask, T v, unsigned delta,
                                                         int width = 32) {
  return ::mactune::simt::dev::shfl_as(::mactune::simt::dev::Shfl::down, mask, v,
                                       static_cast<int>(delta), width);
}
template <class T>
__attribute__((always_inline)) inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask,
                                                        int width = 32) {
  return ::mactune::simt::dev::shfl_as(::mactune::simt::dev::Shfl::bfly, mask, v, lane_mask, width);
}

__attribute__((always_inline)) inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return ::mactune::simt::dev::atomic_add_u32(p, v);
}
__attribute__((always_inline)) inline int atomicAdd(int* p, int v) {
  return ::mactune::simt::dev::atomic_add_i32(p, v);
}
inline float atomicAdd(float* p, float v) {
  return ::mactune::simt::dev::atomic_add_f32(p, v);
}
__attribute__((always_inline)) inline unsigned atomicExch(unsigned* p, unsigned v) {
  return ::mactune::simt::dev::atomic_exch_u32(p, v);
}
__attribute__((always_inline)) inline int atomicExch(int* p, int v) {
  return static_cast<int>(::mactune::simt::dev::atomic_exch_u32(reinterpret_cast<unsigned*>(p),
                                                                static_cast<unsigned>(v)));
}
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
  return ::mactune::simt::dev::atomic_cas_u32(p, cmp, v);
}
inline unsigned atomicMax(unsigned* p, unsigned v) {
  return ::mactune::simt::dev::atomic_max_u32(p, v);
}

// Cache-hinted loads: the same bytes (L1/L2 policy is the hardware's business).
template <class T>
__attribute__((always_inline)) inline T __ldcg(const T* p) {
  T out;
  ::mactune::simt::dev::load_global(&out, p, sizeof(T));
  return out;
}
template <class T>
inline T __ldg(const T* p) {
  T out;
  ::mactune::simt::dev::load_global(&out, p, sizeof(T));
  return out;
}

inline std::size_t __cvta_generic_to_shared(const void* p) {
  return ::mactune::simt::dev::shared_offset(p);
}

// ---- Device math (host libm; CUDA's exp2f/log2f/expf/logf are within 2 ulp of these).
inline float __uint_as_float(unsigned u) {
  return std::bit_cast<float>(u);
}
inline unsigned __float_as_uint(float f) {
  return std::bit_cast<unsigned>(f);
}
inline int __float_as_int(float f) {
  return std::bit_cast<int>(f);
}
inline float __int_as_float(int i) {
  return std::bit_cast<float>(i);
}
inline double __dadd_rn(double a, double b) {
  return a + b;
}
inline double __dsub_rn(double a, double b) {
  return a - b;
}
inline double __dmul_rn(double a, double b) {
  return a * b;
}
inline float __fdividef(float a, float b) {
  return a / b;
}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
// CUDA's overloads for float and double in the global namespace (the pruned match's bound and
// sketch): the host's, exactly (IEEE operations and correctly rounded in both).
using std::isfinite;
using std::lround;
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline int max(int a, int b) {
  return a > b ? a : b;
}
inline unsigned min(unsigned a, unsigned b) {
  return a < b ? a : b;
}
inline unsigned max(unsigned a, unsigned b) {
  return a > b ? a : b;
}
inline long long min(long long a, long long b) {
  return a < b ? a : b;
}
inline long long max(long long a, long long b) {
  return a > b ? a : b;
}
inline float min(float a, float b) {
  return std::fmin(a, b);
}
inline float max(float a, float b) {
  return std::fmax(a, b);
}

// ---- Launches: kernel<<<grid, block, smem, stream>>>(args) becomes
// ::mactune::simt::launch(kernel, "kernel", grid, block, smem, stream)(args).
namespace mactune::simt {

// Enqueues fn on the stream (runs it now, or records it into the graph being captured).
void enqueue(cudaStream_t stream, std::function<void()> fn);
void set_last_error(cudaError_t e);
// A launch above 48 KB of dynamic shared memory needs cudaFuncSetAttribute first, as on a GPU.
bool dynamic_smem_allowed(const void* kernel, std::size_t bytes);

template <class... P>
struct Launch {
  void (*kernel)(P...);
  const char* name;
  dim3 grid, block;
  std::size_t smem;
  cudaStream_t stream;
  template <class... A>
  void operator()(A&&... args) const {
    if (!dynamic_smem_allowed(reinterpret_cast<const void*>(kernel), smem)) {
      set_last_error(cudaErrorInvalidValue);
      return;
    }
    // The arguments are copied now, as a launch copies its parameter block.
    auto bound = [k = kernel, ... a = std::decay_t<P>(std::forward<A>(args))]() { k(a...); };
    const char* n = name;
    const dim3 g = grid, b = block;
    const std::size_t s = smem;
    enqueue(stream, [=] {
      if (!run_grid(n, g, b, s, bound)) set_last_error(cudaErrorLaunchFailure);
    });
  }
};

template <class... P>
Launch<P...> launch(void (*kernel)(P...), const char* name, dim3 grid, dim3 block,
                    std::size_t smem = 0, cudaStream_t stream = nullptr) {
  return Launch<P...>{kernel, name, grid, block, smem, stream};
}

}  // namespace mactune::simt
