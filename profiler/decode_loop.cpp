#include "profiler/decode_loop.h"

#if MACTUNE_PROFILER_CUDA
#include <cuda_profiler_api.h>
#endif

namespace mactune::prof {

StepInputs make_step_inputs(const Problem& shape, int n, std::uint64_t seed, int step) {
  StepInputs in;
  const std::size_t D = static_cast<std::size_t>(shape.head_dim);
  in.q.resize(static_cast<std::size_t>(n) * shape.q_heads * D);
  in.k.resize(static_cast<std::size_t>(n) * shape.kv_heads * D);
  in.v.resize(in.k.size());
  std::uint64_t state =
      detail::splitmix64(seed ^ (0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(step + 1)));
  auto uniform = [&state] {  // [-1, 1)
    state = detail::splitmix64(state);
    return static_cast<float>(static_cast<double>(state >> 11) * (2.0 / 9007199254740992.0) - 1.0);
  };
  for (auto* v : {&in.q, &in.k, &in.v})
    for (float& x : *v) x = uniform();
  return in;
}

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
