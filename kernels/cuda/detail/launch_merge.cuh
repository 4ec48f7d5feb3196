// Definitions of the merge launcher templates of launchers.h. Included only by the
// generated instance translation units of the merge family (templates/instance.cu.in): one
// header per family, so a change to one family's kernel recompiles only its instances.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/detail/merge.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"

namespace mactune::cuda {

template <class Instance>
cudaError_t launch_merge(const MergeParams& p, cudaStream_t stream) {
  static_assert(config_error(Instance::config).empty(), "invalid MergeConfig");
  if (p.n < 1) return cudaSuccess;
  const int grid = merge_grid(static_cast<long long>(p.n) * p.q_heads);
  merge_kernel<Instance><<<grid, kMergeThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mactune::cuda
