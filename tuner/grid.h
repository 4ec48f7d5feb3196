// The grid of a spec: every combination of axis values (zip groups advance together) that
// satisfies the constraints, in a fixed order, as typed points; and the shard split.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "kernels/forced.h"
#include "kernels/problem.h"
#include "tuner/spec.h"

namespace mactune::tuner {

// One point of the grid: a MAC configuration at one workload, measured against the full
// baseline with the same launch parameters.
struct TunePoint {
  std::size_t index = 0;  // position in the whole (unsharded) grid
  Problem shape;          // shape.batch = requests in the step
  int context = 0;        // tokens in each request's KV cache; the step is at m = context
  ForcedHits forced;      // enabled, hit rate, lag, coherence, seed
  MacParams mac;
  // Backend launch parameters in grid order, e.g. {{"threads","0"},{"chunk_tokens","256"}}.
  // The axes that select the instance (CPU isa; CUDA attend, full) are not among them: they
  // are part of the instance name.
  std::vector<std::pair<std::string, std::string>> launch;
  std::string isa = "auto";                    // CPU
  std::string attend = "auto", full = "auto";  // CUDA

  std::string launch_text() const;  // "threads=0,chunk_tokens=256,block_rows=16"
  int launch_int(const std::string& name, int fallback) const;
};

// The shape bucket of a point: one row of the dispatch table and of the decisions.
struct Bucket {
  int head_dim = 0, q_heads = 0, kv_heads = 0;
  std::string dtype;
  int page_size = 0;
  int batch = 0, context = 0;

  std::string shape_key() const;  // "hd128_q32_kv8_bf16_p16"
  std::string key() const;        // "hd128_q32_kv8_bf16_p16_b4_c16384"
  auto operator<=>(const Bucket&) const = default;
};
Bucket bucket_of(const TunePoint& p);

// Canonical text of the MAC settings ("K=512,r=256,tau=0.45,summary=f32,pick=nearest,...").
std::string mac_text(const MacParams& m);

// Expands the spec into its points. Throws InputError "FILE:LINE: KEY: ..." when a
// constraint rejects every point on its own ("impossible"), when the constraints together
// leave nothing, or when a remaining point is not a valid shape or MAC setting.
std::vector<TunePoint> expand_grid(const Spec& spec);

// "i/N" -> {i, N} with 0 <= i < N; InputError otherwise.
std::pair<int, int> parse_shard(const std::string& text);
// Shard i of N: the points whose grid index is i modulo N. Deterministic, disjoint, and their
// union over i is the whole grid; neighbouring (similar-cost) points go to different shards.
std::vector<TunePoint> shard_points(const std::vector<TunePoint>& points, int i, int n);

}  // namespace mactune::tuner
