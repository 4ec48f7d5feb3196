// MACTUNE_CUDA_CHECK(call): throws mactune::Error naming file:line, the call and the CUDA error
// when a runtime call fails. One out-of-line function does the formatting (device.cpp).
#pragma once

#include <cuda_runtime_api.h>

namespace mactune::cuda::detail {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);

}  // namespace mactune::cuda::detail

#define MACTUNE_CUDA_CHECK(call)                                                                  \
  do {                                                                                            \
    const cudaError_t mactune_cuda_status_ = (call);                                              \
    if (mactune_cuda_status_ != cudaSuccess) [[unlikely]]                                         \
      ::mactune::cuda::detail::throw_cuda_error(mactune_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)
