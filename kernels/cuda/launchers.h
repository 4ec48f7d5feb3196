// Host launchers of the CUDA kernels. Each checks its config at compile time, sizes shared
// memory, launches on the given stream and returns the launch status (it never throws or
// synchronizes, so it is safe inside stream capture). The templates take an instance tag, a
// struct named by the canonical instance name with `static constexpr <Family>Config config`
// (generated in <kernels/cuda/instances.h> with the `extern template` declarations of the
// built instances); they are defined in detail/launch_{attend,match,merge}.cuh (one header per
// family; full's launchers are in launch_attend.cuh) and instantiated once per instance
// (generated TUs). Host code reaches instances through the registry (registry.h).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/config.h"
#include "kernels/cuda/params.h"

namespace mactune::cuda {

// attend: grid = persistent CTAs over the plan's items (attend_grid()).
template <class Instance>
cudaError_t launch_attend(const AttendParams& p, int grid, cudaStream_t stream);
// Resident attend CTAs per SM on the current device (the split-KV budget is this x SMs).
template <class Instance>
cudaError_t attend_ctas_per_sm(int& ctas);

template <class Instance>
cudaError_t launch_full(const AttendParams& p, int grid, cudaStream_t stream);
template <class Instance>
cudaError_t full_ctas_per_sm(int& ctas);

// match: grid (p.tiles, p.n * p.q_heads).
template <class Instance>
cudaError_t launch_match(const MatchParams& p, cudaStream_t stream);
template <class Instance>
cudaError_t match_ctas_per_sm(int& ctas);

// merge: one warp per (row, query head).
template <class Instance>
cudaError_t launch_merge(const MergeParams& p, cudaStream_t stream);

// The step kernels without tuning knobs (kernels/cuda/step_kernels.cu).
cudaError_t launch_prepare(const PrepareParams& p, int n, cudaStream_t stream);
cudaError_t launch_plan(const PlanParams& p, cudaStream_t stream);  // one CTA
cudaError_t launch_synthetic(const SyntheticParams& p, cudaStream_t stream);
// The pruned match (match_mode = pruned; one CTA per row and query head, ring capacity at most
// kPrunedMaxCapacity) and the sketch kernel that keeps its ring sketch current
// (kernels/cuda/match_pruned.cu).
cudaError_t launch_match_pruned(const PrunedMatchParams& p, int head_dim, DType kv_dtype,
                                cudaStream_t stream);
cudaError_t launch_sketch(const SketchParams& p, cudaStream_t stream);
// cudaSuccess when this binary has code for the current device.
cudaError_t probe_kernel_image();

}  // namespace mactune::cuda
