// Definitions of the attend and full launcher templates of launchers.h. Included only by the
// generated instance translation units of the attend and full families (templates/instance.cu.in):
// one header per family, so a change to one family's kernel recompiles only its instances.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/detail/attend.cuh"
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

}  // namespace mactune::cuda
