// Merge: one warp per (request, query head) combines the head's partial states with its ring
// summary, writes the output and (MAC) the new ring entry. Natural-log lse throughout.
//
// With the group's merge plan (kernels/plan.h) items [first, split) lie below cache_end(m) and
// items [split, last) are the tail:
//   forward   entry = (hit ? ring[p] : empty) (+) band,  out = entry (+) tail
//   subtract  out = (hit ? ring[p] : empty) (+) all,     entry = out (-) tail (guarded)
//   full      out = (+) all items (no prefix, no ring)
// The ring slot m mod K may hold candidate m - K, which this same head may have matched: the
// warp reads its prefix before it writes the slot. Pairwise merges and the removal are the
// state algebra of kernels/state.h, applied to each lane's dims (every lane computes the same
// lse); an n-ary combine of partials (max, then weights) is below.
#pragma once

#include <cstdint>

#include "kernels/cuda/detail/ptx.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/params.h"
#include "kernels/state.h"

namespace mactune::cuda::detail {

template <MergeConfig C>
struct MergeWarp {
  static constexpr int D = C.head_dim;
  static constexpr int E = D / 32;  // dims per lane
  static constexpr float kNegInf = -__builtin_huge_valf();
  static_assert(config_error(C).empty(), "invalid MergeConfig (see config_error)");

  const MergeParams& p;
  int lane, j;  // j = the head's row within its group

  // (o, lse) = (+) of the head's partials of items [first, last): lse = M + ln sum exp(l_i - M),
  // o = sum exp(l_i - lse) o_i; no items or all empty -> (0, -inf).
  __device__ void combine(int first, int last, float (&o)[E], float& lse) const {
#pragma unroll
    for (int e = 0; e < E; ++e) o[e] = 0.0f;
    lse = kNegInf;
    float mx = kNegInf;
    for (int i = first + lane; i < last; i += 32)
      mx = fmaxf(mx, p.partial_lse[static_cast<long long>(i) * p.group + j]);
    mx = warp_max(mx);
    if (mx == kNegInf) return;
    float z = 0.0f;
    for (int i = first + lane; i < last; i += 32)
      z += expf(p.partial_lse[static_cast<long long>(i) * p.group + j] - mx);
    lse = mx + logf(warp_sum(z));
#pragma unroll 4
    for (int i = first; i < last; ++i) {
      const long long at = static_cast<long long>(i) * p.group + j;
      const float w = expf(p.partial_lse[at] - lse);
      const float* src = p.partial_o + at * D + lane * E;
#pragma unroll
      for (int e = 0; e < E; ++e) o[e] = fmaf(w, src[e], o[e]);
    }
  }

  __device__ void run(int head_row) {
    const int row = head_row / p.q_heads, h = head_row % p.q_heads;
    j = h % p.group;
    const GroupItems mp = p.merge_plan[static_cast<long long>(row) * p.kv_heads + h / p.group];
    float out[E], out_lse;
    float* dst = p.out + static_cast<long long>(head_row) * D + lane * E;
    if (p.decisions == nullptr) {  // full attention
      combine(mp.first, mp.last, out, out_lse);
#pragma unroll
      for (int e = 0; e < E; ++e) dst[e] = out[e];
      return;
    }
    const StepRow r = p.rows[row];
    const HeadDecision d = p.decisions[head_row];
    const long long ring_head = static_cast<long long>(r.slot) * p.q_heads + h;  // [slot, h]
    // The reused prefix: ring[p] (o in the summary dtype, lse f32), read before any ring write.
    float pre[E], pre_lse = kNegInf;
#pragma unroll
    for (int e = 0; e < E; ++e) pre[e] = 0.0f;
    if (d.hit) {
      const long long at = ring_head * p.ring.capacity + d.p % p.ring.capacity;
      pre_lse = p.ring.lse[at];
      load_summary(at * D + lane * E, pre);
    }
    float entry[E], entry_lse = kNegInf;
    float tail[E], tail_lse;
    combine(mp.split, mp.last, tail, tail_lse);
    if (p.rectify == Rectify::forward) {
      float band[E], band_lse;
      combine(mp.first, mp.split, band, band_lse);
#pragma unroll
      for (int e = 0; e < E; ++e) entry[e] = pre[e];
      entry_lse = pre_lse;
      merge_into(entry, entry_lse, band, band_lse, E);
#pragma unroll
      for (int e = 0; e < E; ++e) out[e] = entry[e];
      out_lse = entry_lse;
      merge_into(out, out_lse, tail, tail_lse, E);
    } else {
      float all[E], all_lse;
      combine(mp.first, mp.last, all, all_lse);
#pragma unroll
      for (int e = 0; e < E; ++e) out[e] = pre[e];
      out_lse = pre_lse;
      merge_into(out, out_lse, all, all_lse, E);
#pragma unroll
      for (int e = 0; e < E; ++e) entry[e] = 0.0f;
      bool fired = false;
      if (cache_end(r.m, p.band) > 0)
        fired = remove_into(entry, entry_lse, out, out_lse, tail, tail_lse, E, p.subtract_guard);
      if (lane == 0) p.guard_fired[head_row] = fired ? 1 : 0;
    }
#pragma unroll
    for (int e = 0; e < E; ++e) dst[e] = out[e];
    // The new ring entry at slot m mod K: q~ (bits as staged), the summary, its lse.
    __syncwarp();
    const long long at = ring_head * p.ring.capacity + r.m % p.ring.capacity;
    const std::uint16_t* q = static_cast<const std::uint16_t*>(p.q_ring_in) +
                             static_cast<long long>(head_row) * D + lane * E;
    std::uint16_t* rq = static_cast<std::uint16_t*>(p.ring.q) + at * D + lane * E;
#pragma unroll
    for (int e = 0; e < E; ++e) rq[e] = q[e];
    store_summary(at * D + lane * E, entry);
    if (lane == 0) p.ring.lse[at] = entry_lse;
    if (lane == 0 && h == 0)
      p.ring.pos[static_cast<long long>(r.slot) * p.ring.capacity + r.m % p.ring.capacity] = r.m;
  }

  __device__ void load_summary(long long at, float (&x)[E]) const {
    if (p.ring.summary_dtype == DType::f32) {
      const float* src = static_cast<const float*>(p.ring.o) + at;
#pragma unroll
      for (int e = 0; e < E; ++e) x[e] = src[e];
    } else {
      const bf16_t* src = static_cast<const bf16_t*>(p.ring.o) + at;
#pragma unroll
      for (int e = 0; e < E; ++e) x[e] = bf16_to_float(src[e]);
    }
  }
  __device__ void store_summary(long long at, const float (&x)[E]) const {
    if (p.ring.summary_dtype == DType::f32) {
      float* dst = static_cast<float*>(p.ring.o) + at;
#pragma unroll
      for (int e = 0; e < E; ++e) dst[e] = x[e];
    } else {
      bf16_t* dst = static_cast<bf16_t*>(p.ring.o) + at;
#pragma unroll
      for (int e = 0; e < E; ++e) dst[e] = float_to_bf16(x[e]);
    }
  }
};

}  // namespace mactune::cuda::detail

namespace mactune::cuda {

template <class Instance>
__global__ void __launch_bounds__(kMergeThreads)
    merge_kernel(const __grid_constant__ MergeParams p) {
  const int head_row =
      static_cast<int>(blockIdx.x) * kMergeWarps + static_cast<int>(threadIdx.x >> 5);
  if (head_row >= p.n * p.q_heads) return;  // whole warps exit together
  detail::MergeWarp<Instance::config> w{p, static_cast<int>(threadIdx.x & 31), 0};
  w.run(head_row);
}

}  // namespace mactune::cuda
