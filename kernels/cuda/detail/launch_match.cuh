// Definitions of the match launcher templates of launchers.h. Included only by the
// generated instance translation units of the match family (templates/instance.cu.in): one
// header per family, so a change to one family's kernel recompiles only its instances.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/detail/match.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"

namespace mactune::cuda {

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

}  // namespace mactune::cuda
