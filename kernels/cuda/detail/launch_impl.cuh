// Definitions of the launcher templates of launchers.h. Included only by the generated
// instance translation units (one per instance of the grid in instances.txt).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/detail/attend.cuh"
#include "kernels/cuda/detail/match.cuh"
#include "kernels/cuda/detail/merge.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"

namespace mactune::cuda {

namespace detail {

template <class Kernel>
cudaError_t set_smem(Kernel kernel, std::size_t bytes) {
  // Above 48 KB a kernel must opt in; setting it every launch is cheap and capture-safe.
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

}  // namespace detail

template <class Instance>
cudaError_t launch_attend(const AttendParams& p, int grid, cudaStream_t stream) {
  constexpr AttendConfig C = Instance::config;
  static_assert(config_error(C).empty(), "invalid AttendConfig (see config_error)");
  static_assert(attend_smem_fits(C), "attend config exceeds kMaxSmemPerCta (227 KB)");
  constexpr std::size_t smem = attend_smem_bytes(C);
  if (const cudaError_t e = detail::set_smem(attend_kernel<Instance>, smem); e != cudaSuccess)
    return e;
  attend_kernel<Instance><<<grid, kAttendThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <class Instance>
cudaError_t attend_ctas_per_sm(int& ctas) {
  constexpr std::size_t smem = attend_smem_bytes(Instance::config);
  if (const cudaError_t e = detail::set_smem(attend_kernel<Instance>, smem); e != cudaSuccess)
    return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, attend_kernel<Instance>,
                                                       kAttendThreads, smem);
}

template <class Instance>
cudaError_t launch_full(const AttendParams& p, int grid, cudaStream_t stream) {
  constexpr AttendConfig C = as_attend(Instance::config);
  static_assert(config_error(C).empty(), "invalid FullConfig (see config_error)");
  static_assert(attend_smem_fits(C), "full config exceeds kMaxSmemPerCta (227 KB)");
  constexpr std::size_t smem = attend_smem_bytes(C);
  if (const cudaError_t e = detail::set_smem(full_kernel<Instance>, smem); e != cudaSuccess)
    return e;
  full_kernel<Instance><<<grid, kAttendThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <class Instance>
cudaError_t full_ctas_per_sm(int& ctas) {
  constexpr std::size_t smem = attend_smem_bytes(as_attend(Instance::config));
  if (const cudaError_t e = detail::set_smem(full_kernel<Instance>, smem); e != cudaSuccess)
    return e;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, full_kernel<Instance>, kAttendThreads,
                                                       smem);
}

template <class Instance>
cudaError_t launch_match(const MatchParams& p, cudaStream_t stream) {
  static_assert(config_error(Instance::config).empty(), "invalid MatchConfig");
  if (p.n < 1) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.n * p.q_heads));
  match_kernel<Instance><<<grid, kMatchThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <class Instance>
cudaError_t match_ctas_per_sm(int& ctas) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, match_kernel<Instance>, kMatchThreads,
                                                       0);
}

template <class Instance>
cudaError_t launch_merge(const MergeParams& p, cudaStream_t stream) {
  static_assert(config_error(Instance::config).empty(), "invalid MergeConfig");
  if (p.n < 1) return cudaSuccess;
  const int grid = merge_grid(static_cast<long long>(p.n) * p.q_heads);
  merge_kernel<Instance><<<grid, kMergeThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mactune::cuda
