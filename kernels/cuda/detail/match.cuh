// Match: scan the ring of each (request, query head) for the nearest earlier query.
//
// Grid (tiles, n * q_heads). A CTA scans `candidates_per_cta` consecutive positions of the
// candidate window [max(0, m - K), m): a valid candidate's slot holds its position and a
// non-empty summary. d^2 = |q~_m - q~_p|^2 in fp32 over the raw pre-RoPE queries (stored in the
// KV dtype); every lane holds 8 dims (16-byte loads). d^2 is always summed as
// (first-half dims) + (second-half dims), each half by the same shuffle tree, so the probe and
// the full scan produce bit-identical distances.
//
// Probe (MatchConfig::probe): a lane group first reads half a row; when that half alone reaches
// the threshold the candidate cannot be a hit under any pick rule (the rest only adds), so the
// second half is never read. Decisions are unchanged; on a miss the reported d2 is then the
// smallest value seen (>= the threshold), not necessarily the exact minimum.
//
// The CTA that finishes a head's last tile (an atomic counter per head, reset by that CTA, so
// graph replays start at zero) reduces the tiles into the head's best; the planner turns it
// into the decision (detail/decide.h). Heads with m < min_context are not scanned.
#pragma once

#include <cstdint>

#include "kernels/cuda/detail/ptx.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/params.h"

namespace mactune::cuda::detail {

constexpr float kInf = __builtin_huge_valf();

// a is the better candidate: valid, smaller d^2, ties to the older (smaller) position.
__device__ __forceinline__ bool better(float d2a, int pa, float d2b, int pb) {
  return pa >= 0 && (pb < 0 || d2a < d2b || (d2a == d2b && pa < pb));
}

__device__ __forceinline__ void combine(MatchPartial& a, const MatchPartial& b) {
  if (better(b.d2, b.pos, a.d2, a.pos)) {
    a.d2 = b.d2;
    a.pos = b.pos;
  }
  a.newest = b.newest > a.newest ? b.newest : a.newest;
  a.bound = fminf(a.bound, b.bound);
}

__device__ __forceinline__ MatchPartial shfl_partial(const MatchPartial& x, int offset) {
  MatchPartial y;
  y.d2 = __shfl_xor_sync(0xffffffffu, x.d2, offset);
  y.pos = __shfl_xor_sync(0xffffffffu, x.pos, offset);
  y.newest = __shfl_xor_sync(0xffffffffu, x.newest, offset);
  y.bound = __shfl_xor_sync(0xffffffffu, x.bound, offset);
  return y;
}

// Sum over the `half_lanes` lanes that hold one half of a row (a fixed xor tree).
template <int kHalfLanes>
__device__ __forceinline__ float half_row_sum(float x) {
#pragma unroll
  for (int o = kHalfLanes / 2; o >= 1; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ __forceinline__ float sq_dist8(const float (&a)[8], const float (&b)[8]) {
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float d = a[i] - b[i];
    acc = fmaf(d, d, acc);
  }
  return acc;
}

template <MatchConfig C>
struct MatchCta {
  static constexpr int D = C.head_dim;
  static constexpr int kLanesPerRow = D / 8;
  static constexpr int kHalfLanes = kLanesPerRow / 2;
  static constexpr DType kT = C.kv_dtype;
  static_assert(config_error(C).empty(), "invalid MatchConfig (see config_error)");

  const MatchParams& p;
  int lane, warp, head_row, h, slot, m;

  __device__ const std::uint16_t* ring_row(int sl) const {
    return static_cast<const std::uint16_t*>(p.ring.q) +
           ((static_cast<long long>(slot) * p.q_heads + h) * p.ring.capacity + sl) * D;
  }
  __device__ bool entry_valid(int pos) const {
    const int sl = pos % p.ring.capacity;
    return p.ring.pos[static_cast<long long>(slot) * p.ring.capacity + sl] == pos &&
           p.ring.lse[(static_cast<long long>(slot) * p.q_heads + h) * p.ring.capacity + sl] >
               -kInf;
  }
  __device__ void load_chunk(const std::uint16_t* base, int chunk, float (&x)[8]) const {
    unpack8<kT>(*reinterpret_cast<const uint4*>(base + chunk * 8), x);
  }

  // Full rows: a row per kLanesPerRow lanes; `normalized` compares q / |q| * sqrt(D).
  __device__ void scan_full(int lo, int hi, bool normalized, MatchPartial& best) const {
    constexpr int kRowsPerWarp = 32 / kLanesPerRow;
    const int chunk = lane % kLanesPerRow, rw = lane / kLanesPerRow;
    float a[8];
    load_chunk(
        static_cast<const std::uint16_t*>(p.q_ring_in) + static_cast<long long>(head_row) * D,
        chunk, a);
    if (normalized) {
      float n2 = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) n2 = fmaf(a[i], a[i], n2);
      n2 = half_row_sum<kHalfLanes>(n2);
      n2 += __shfl_xor_sync(0xffffffffu, n2, kHalfLanes);
      const float s = n2 > 0.0f ? sqrtf(static_cast<float>(D) / n2) : 1.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) a[i] *= s;
    }
#pragma unroll 4
    for (int c0 = lo + warp * kRowsPerWarp; c0 < hi; c0 += kMatchWarps * kRowsPerWarp) {
      const int pos = c0 + rw;
      const bool valid = pos < hi && entry_valid(pos);
      float b[8] = {};
      if (valid) load_chunk(ring_row(pos % p.ring.capacity), chunk, b);
      if (normalized) {
        float n2 = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) n2 = fmaf(b[i], b[i], n2);
        n2 = half_row_sum<kHalfLanes>(n2);
        n2 += __shfl_xor_sync(0xffffffffu, n2, kHalfLanes);
        const float s = n2 > 0.0f ? sqrtf(static_cast<float>(D) / n2) : 1.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) b[i] *= s;
      }
      const float half = half_row_sum<kHalfLanes>(sq_dist8(a, b));
      const float d2 = half + __shfl_xor_sync(0xffffffffu, half, kHalfLanes);  // first + second
      if (valid) {
        if (better(d2, pos, best.d2, best.pos)) {
          best.d2 = d2;
          best.pos = pos;
        }
        if (d2 < p.threshold && pos > best.newest) best.newest = pos;
      }
    }
  }

  // Half rows: a lane group of kHalfLanes reads the first half; the second only if needed.
  __device__ void scan_probe(int lo, int hi, MatchPartial& best) const {
    constexpr int kRowsPerWarp = 32 / kHalfLanes;
    const int chunk = lane % kHalfLanes, rw = lane / kHalfLanes;
    float a1[8], a2[8];
    const std::uint16_t* q =
        static_cast<const std::uint16_t*>(p.q_ring_in) + static_cast<long long>(head_row) * D;
    load_chunk(q, chunk, a1);
    load_chunk(q, chunk + kHalfLanes, a2);
#pragma unroll 4
    for (int c0 = lo + warp * kRowsPerWarp; c0 < hi; c0 += kMatchWarps * kRowsPerWarp) {
      const int pos = c0 + rw;
      const bool valid = pos < hi && entry_valid(pos);
      const std::uint16_t* r = valid ? ring_row(pos % p.ring.capacity) : nullptr;
      float b[8] = {};
      if (valid) load_chunk(r, chunk, b);
      const float first = half_row_sum<kHalfLanes>(sq_dist8(a1, b));
      const bool need = valid && first < p.threshold;
#pragma unroll
      for (int i = 0; i < 8; ++i) b[i] = 0.0f;
      if (need) load_chunk(r, chunk + kHalfLanes, b);
      const float second = half_row_sum<kHalfLanes>(need ? sq_dist8(a2, b) : 0.0f);
      if (need) {
        const float d2 = first + second;
        if (better(d2, pos, best.d2, best.pos)) {
          best.d2 = d2;
          best.pos = pos;
        }
        if (d2 < p.threshold && pos > best.newest) best.newest = pos;
      } else if (valid) {
        best.bound = fminf(best.bound, first);
      }
    }
  }

  __device__ void run() {
    lane = static_cast<int>(threadIdx.x) & 31;
    warp = static_cast<int>(threadIdx.x) >> 5;
    head_row = static_cast<int>(blockIdx.y);
    const int row = head_row / p.q_heads;
    h = head_row % p.q_heads;
    slot = p.rows[row].slot;
    m = p.rows[row].m;
    if (m < p.min_context) return;  // not eligible: a miss (the planner decides it)
    const int window_lo = m > p.ring.capacity ? m - p.ring.capacity : 0;
    const long long lo_ll = window_lo + static_cast<long long>(blockIdx.x) * p.candidates_per_cta;
    const int lo = lo_ll < m ? static_cast<int>(lo_ll) : m;
    const int hi = lo + p.candidates_per_cta < m ? lo + p.candidates_per_cta : m;

    MatchPartial best{kInf, -1, -1, kInf};
    const bool normalized = p.pick == PickRule::normalized;
    if (C.probe && !normalized)
      scan_probe(lo, hi, best);
    else
      scan_full(lo, hi, normalized, best);
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) combine(best, shfl_partial(best, o));

    __shared__ MatchPartial warp_best[kMatchWarps];
    __shared__ int is_last;
    if (lane == 0) warp_best[warp] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
      MatchPartial t = warp_best[0];
      for (int w = 1; w < kMatchWarps; ++w) combine(t, warp_best[w]);
      p.partials[static_cast<long long>(head_row) * p.tiles + blockIdx.x] = t;
      __threadfence();  // the partial is visible device-wide before the count says so
      const unsigned done = atomicAdd(&p.counters[head_row], 1u);
      is_last = done == static_cast<unsigned>(p.tiles - 1);
    }
    __syncthreads();
    if (!is_last || warp != 0) return;
    __threadfence();
    MatchPartial all{kInf, -1, -1, kInf};
    for (int t = lane; t < p.tiles; t += 32) {
      const MatchPartial* src = p.partials + static_cast<long long>(head_row) * p.tiles + t;
      MatchPartial x;
      x.d2 = __ldcg(&src->d2);  // L2: other CTAs wrote these
      x.pos = __ldcg(&src->pos);
      x.newest = __ldcg(&src->newest);
      x.bound = __ldcg(&src->bound);
      combine(all, x);
    }
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) combine(all, shfl_partial(all, o));
    if (lane == 0) {
      p.best[head_row] = all;
      p.counters[head_row] = 0u;  // ready for the next launch or graph replay
    }
  }
};

}  // namespace mactune::cuda::detail

namespace mactune::cuda {

// At least 4 resident CTAs (<= 64 registers): left alone, ptxas capped p0 at 40 and spilled.
template <class Instance>
__global__ void __launch_bounds__(kMatchThreads, 4)
    match_kernel(const __grid_constant__ MatchParams p) {
  detail::MatchCta<Instance::config> cta{p, 0, 0, 0, 0, 0, 0};
  cta.run();
}

}  // namespace mactune::cuda
