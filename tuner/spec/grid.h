// The grid of a spec: every combination of axis values (zip groups advance together) that
// satisfies the constraints, in a fixed order, as typed points; and the shard split.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/engine_config.h"
#include "kernels/cuda/engine_config.h"
#include "kernels/forced.h"
#include "kernels/launch_params.h"
#include "kernels/problem.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

// Launch parameters: a backend's engine settings that travel by name (kernels/launch_params.h).
using Launch = LaunchParams;
// "threads=0,chunk_tokens=256,block_rows=16": the text the database keys points by.
inline std::string launch_text(const Launch& launch) {
  return launch_params_text(launch);
}
// Reads launch_text() back through the backend's engine table.
Launch parse_launch(Backend backend, std::string_view text);
Params to_params(const Launch& launch);

// One point of the grid: a MAC configuration at one workload, measured against the full
// baseline with the same launch parameters. Every axis of the spec is a field of one of its
// parts (tuner/spec/axes.h), set through that part's field table.
struct TunePoint {
  std::size_t index = 0;           // position in the whole (unsharded) grid
  Backend backend = Backend::cpu;  // whose engine config applies
  Problem shape;                   // shape.batch = requests in the step
  int context = 0;                 // tokens in each request's KV cache; the step is at m = context
  ForcedHits forced;               // enabled, hit rate, lag, coherence, seed
  MacParams mac;
  cpu::EngineConfig cpu;    // kernels.cpu (backend "cpu")
  cuda::EngineConfig cuda;  // kernels.cuda (backend "cuda")

  // The launch parameters of the point's backend: its engine's fields that are not part of
  // the instance name, typed, in table order.
  Launch launch() const;
  std::string launch_text() const { return tuner::launch_text(launch()); }
};
Bucket bucket_of(const TunePoint& p);

// Expands the spec into its points. Throws InputError "FILE:LINE: KEY: ..." when a
// constraint rejects every point on its own ("impossible"), when the constraints together
// leave nothing, or when a remaining point is not a valid shape or MAC setting. Points whose
// skip ratio cannot be reached exactly (tuner/spec/skip_ratio.h) are left out, one line each in
// `unreachable` (when given) saying why and what would reach it; none left is an InputError.
std::vector<TunePoint> expand_grid(const Spec& spec,
                                   std::vector<std::string>* unreachable = nullptr);

// "i/N" -> {i, N} with 0 <= i < N; InputError otherwise.
std::pair<int, int> parse_shard(const std::string& text);
// Shard i of N: the points whose grid index is i modulo N. Deterministic, disjoint, and their
// union over i is the whole grid; neighbouring (similar-cost) points go to different shards.
std::vector<TunePoint> shard_points(const std::vector<TunePoint>& points, int i, int n);

}  // namespace mactune::tuner
