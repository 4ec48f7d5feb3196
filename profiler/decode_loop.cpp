#include "profiler/decode_loop.h"

#if MACTUNE_PROFILER_CUDA
#include <cuda_profiler_api.h>
#endif

namespace mactune::prof {

CudaProfilerRange::CudaProfilerRange(bool enabled) {
#if MACTUNE_PROFILER_CUDA
  if (enabled) started_ = cudaProfilerStart() == cudaSuccess;
#else
  (void)enabled;
#endif
}

CudaProfilerRange::~CudaProfilerRange() {
#if MACTUNE_PROFILER_CUDA
  if (started_) cudaProfilerStop();
#endif
}

}  // namespace mactune::prof
