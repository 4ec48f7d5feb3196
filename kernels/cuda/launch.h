// Launch-parameter math of the CUDA kernels: threads, shared memory, grids, workspace sizes
// and match tiling. Pure functions with no CUDA headers, so
// they are tested on every machine (tests/cuda, label host) and used by the launchers as is.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/config.h"
#include "kernels/cuda/config.h"
#include "kernels/plan.h"

namespace mactune::cuda {

// ---- Thread counts (fixed by the kernels' warp layouts).

inline constexpr int kAttendWarps = 4;  // each warp owns tile_tokens / 4 tokens of a stage
inline constexpr int kAttendThreads = 32 * kAttendWarps;
inline constexpr int kMmaRows = 16;  // query rows of one MMA tile: G <= 16 heads, zero-padded
inline constexpr int kMatchWarps = 8;
inline constexpr int kMatchThreads = 32 * kMatchWarps;
inline constexpr int kMergeWarps = 4;  // one warp per (request, query head)
inline constexpr int kMergeThreads = 32 * kMergeWarps;
inline constexpr int kPlanThreads = 1024;  // the planner is one CTA; a warp a chunk candidate
inline constexpr int kPlanWarps = kPlanThreads / 32;

// ---- attend / full.

// Dynamic shared memory of one attend CTA: q (hi and lo halves, [16][D] 16-bit each), then the
// K/V ring of `stages` tiles ([T][D] each), which the epilogue reuses for the cross-warp merge
// (per token part: G rows of D fp32 accumulators, 16 rows of (max, sum)).
constexpr std::size_t attend_q_bytes(const AttendConfig& c) {
  return 2u * kMmaRows * static_cast<std::size_t>(c.head_dim) * 2u;
}
constexpr std::size_t attend_pipeline_bytes(const AttendConfig& c) {
  return static_cast<std::size_t>(c.stages) * c.tile_tokens * c.head_dim * 2u * 2u;
}
// Warps that share a token range (each accumulating its share of the dims): 2 for D = 256.
constexpr int attend_dim_parts(const AttendConfig& c) {
  return c.head_dim > 128 ? c.head_dim / 128 : 1;
}
constexpr std::size_t attend_scratch_bytes(const AttendConfig& c) {
  const std::size_t token_parts = static_cast<std::size_t>(kAttendWarps / attend_dim_parts(c));
  return token_parts * c.group * c.head_dim * 4u + token_parts * kMmaRows * 2u * 4u;
}
constexpr std::size_t attend_smem_bytes(const AttendConfig& c) {
  const std::size_t pipe = attend_pipeline_bytes(c), scratch = attend_scratch_bytes(c);
  return attend_q_bytes(c) + (pipe > scratch ? pipe : scratch);
}
constexpr std::size_t attend_smem_bytes(const FullConfig& c) {
  return attend_smem_bytes(as_attend(c));
}

// The shared memory one CTA may have on sm_90 (H100/H200: 227 KB opt-in). The instance grid
// (grid.h) leaves out the configs over it; the launchers static_assert it.
inline constexpr std::size_t kMaxSmemPerCta = 227u * 1024u;
constexpr bool attend_smem_fits(const AttendConfig& c) {
  return attend_smem_bytes(c) <= kMaxSmemPerCta;
}
constexpr bool attend_smem_fits(const FullConfig& c) {
  return attend_smem_fits(as_attend(c));
}

// The CTA budget of a split-KV plan: resident CTAs per SM (occupancy) x SMs.
constexpr std::int32_t attend_budget(int ctas_per_sm, int sms) {
  const long long b =
      static_cast<long long>(ctas_per_sm < 1 ? 1 : ctas_per_sm) * (sms < 1 ? 1 : sms);
  return b > (1 << 30) ? (1 << 30) : static_cast<std::int32_t>(b);
}

// The planning policy of a CUDA step (kernels/plan.h) and the fixed size of its arrays.
inline PlanLimits attend_limits(std::int32_t budget, int min_chunk) {
  return cuda_plan_limits(budget, min_chunk);
}
inline std::int32_t attend_capacity(std::int32_t groups, std::int32_t budget, int min_chunk) {
  return plan_capacity(groups, attend_limits(budget, min_chunk));
}

// Persistent grid: never more CTAs than can be resident, never more than there can be items.
constexpr std::int32_t attend_grid(std::int32_t capacity, std::int32_t budget) {
  const std::int32_t g = capacity < budget ? capacity : budget;
  return g < 1 ? 1 : g;
}

// Partial states of a plan: o [capacity, G, D] fp32 and lse [capacity, G] fp32 (natural log).
constexpr std::size_t partial_o_bytes(std::int32_t capacity, int group, int head_dim) {
  return static_cast<std::size_t>(capacity) * group * head_dim * 4u;
}
constexpr std::size_t partial_lse_bytes(std::int32_t capacity, int group) {
  return static_cast<std::size_t>(capacity) * group * 4u;
}

// ---- match.

// Ring rows one match CTA evaluates per pass: a row takes D/8 lanes (16 bytes each); with the
// probe a lane group holds half a row, so twice as many rows are in flight.
constexpr int match_rows_per_pass(const MatchConfig& c) {
  const int lanes_per_row = c.head_dim / 8;
  return kMatchWarps * (32 / lanes_per_row) * (c.probe ? 2 : 1);
}

// Ring candidates per match CTA: the largest power-of-two multiple of a pass such that the grid
// (heads x tiles) still covers every resident CTA slot, else the smallest (most CTAs).
constexpr int match_candidates_per_cta(const MatchConfig& c, std::int64_t heads, int ring_capacity,
                                       std::int64_t resident_ctas) {
  const int base = match_rows_per_pass(c);
  int best = base;
  for (int cand = base; cand < ring_capacity && cand <= (1 << 20); cand *= 2) {
    const std::int64_t tiles = (ring_capacity + cand - 1) / cand;
    if (heads * tiles >= resident_ctas) best = cand;
  }
  return best;
}

constexpr int match_tiles(int ring_capacity, int candidates_per_cta) {
  return (ring_capacity + candidates_per_cta - 1) / candidates_per_cta;
}

// ---- merge.

constexpr std::int32_t merge_grid(std::int64_t heads) {
  return static_cast<std::int32_t>((heads + kMergeWarps - 1) / kMergeWarps);
}

}  // namespace mactune::cuda
