// The device planner: one CTA of 1024 threads inside the step (and its graph) turns the heads'
// decisions into group spans and plans them with the functions of kernels/plan.h, in parallel
// where kernels/plan_serial.h loops, with the same integer results (tests/cuda checks it):
//   1. decisions (MAC; with group_hits each group's demotion, by the thread that owns the
//      group) and spans; the longest segment and the total cost (block reductions)
//   2. uniform candidates: warp c searches candidate c's chunk and sums its estimate
//   3. the balanced plan, written out: costs and item counts by block scans over the groups
//   4. if the best uniform candidate's estimate beats the balanced makespan, the uniform plan
//      overwrites it (item and big-item offsets by block scans)
// It also zeroes the attend kernel's ticket counter, so a replayed graph starts afresh.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/detail/decide.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/params.h"
#include "kernels/plan.h"

namespace mactune::cuda {
namespace {

template <class T>
__device__ __forceinline__ T warp_sum(T x) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
template <class T>
__device__ __forceinline__ T warp_max(T x) {
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) {
    const T y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}

// Block-wide sum (kMax = false) or maximum of x; every thread gets it.
template <bool kMax, class T>
__device__ T block_reduce(T x, T* scratch) {
  x = kMax ? warp_max(x) : warp_sum(x);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : T(0);
  x = kMax ? warp_max(x) : warp_sum(x);
  __syncthreads();
  return x;
}

// Exclusive prefix sum over the block in thread order; *total = the sum of all.
template <class T>
__device__ T block_exclusive_scan(T x, T* scratch, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  T inc = x;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  if (lane == 31) scratch[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? scratch[lane] : T(0);
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const T y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    if (lane < warps) scratch[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const T before = (warp > 0 ? scratch[warp - 1] : T(0)) + inc - x;
  *total = scratch[warps - 1];
  __syncthreads();
  return before;
}

// plan_serial.h's smallest_fitting_chunk with the item counts summed by a warp.
__device__ std::int32_t warp_smallest_chunk(const GroupSpan* spans, int groups,
                                            const ChunkRange& r) {
  const int lane = threadIdx.x & 31;
  auto count = [&](std::int32_t chunk) {
    long long c = 0;
    for (int gi = lane; gi < groups; gi += 32) c += group_items(spans[gi], chunk, r.lo, r.family);
    return warp_sum(c);
  };
  std::int32_t lo = r.lo, hi = r.hi;
  if (count(hi) > r.budget) return hi;
  while (lo < hi) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (count(mid) <= r.budget)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

__global__ void __launch_bounds__(kPlanThreads) plan_kernel(const __grid_constant__ PlanParams p) {
  __shared__ long long scratch64[32];
  __shared__ int scratch32[32];
  __shared__ long long cand_est[kPlanWarps];
  __shared__ std::int32_t cand_chunk[kPlanWarps];
  __shared__ std::int32_t best_chunk_s;
  __shared__ long long best_est_s;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int groups = p.n * p.kv_heads;
  const PlanLimits& L = p.limits;
  if (p.decisions != nullptr) {
    for (int hr = tid; hr < p.n * p.q_heads; hr += kPlanThreads)
      p.decisions[hr] = detail::decide_head(p, hr / p.q_heads, hr % p.q_heads);
    __syncthreads();  // decisions are read back by other threads below
  }
  // 1. Spans; each thread owns the contiguous groups [g0, g1) from here on.
  const int per = (groups + kPlanThreads - 1) / kPlanThreads;
  const int g0 = min(groups, tid * per), g1 = min(groups, g0 + per);
  long long longest = 1, cost = 0;
  for (int gi = g0; gi < g1; ++gi) {
    const int row = gi / p.kv_heads, g = gi % p.kv_heads, m = p.rows[row].m;
    GroupSpan s{row, g, 0, m + 1, m + 1};  // full attention: one segment
    if (p.decisions != nullptr) {
      HeadDecision* d = p.decisions + static_cast<long long>(row) * p.q_heads + g * p.group;
      if (p.group_hits) detail::demote_partial_group(d, p.group);  // before the span reads starts
      int begin = m + 1;
      for (int j = 0; j < p.group; ++j) begin = min(begin, d[j].start);
      s.cache_end = cache_end(m, p.band);
      s.begin = min(begin, s.cache_end);
    }
    p.spans[gi] = s;
    longest = max(longest, static_cast<long long>(longest_segment(s)));
    cost += group_cost(s, L);
  }
  const long long my_cost = cost;
  // The reductions' barriers also order the span writes before the reads below.
  longest = block_reduce<true>(longest, scratch64);
  const long long total = block_reduce<false>(cost, scratch64);
  if (total == 0) {  // nothing to read
    for (int gi = g0; gi < g1; ++gi) p.merge_plan[gi] = GroupItems{};
    if (tid == 0) {
      *p.choice = PlanChoice{PlanKind::balanced, 0, 0, 0, 0};
      *p.work_counter = 0;
    }
    return;
  }
  // 2. Uniform candidates, a warp each.
  const std::int32_t lng = static_cast<std::int32_t>(longest);
  const int candidates = L.min_chunk >= lng ? 1 : 2 * L.max_waves;
  if (warp < candidates) {
    const std::int32_t chunk =
        L.min_chunk >= lng ? L.min_chunk
                           : warp_smallest_chunk(p.spans, groups, candidate_range(warp, lng, L));
    UniformStats s;
    for (int gi = lane; gi < groups; gi += 32) s.add(p.spans[gi], chunk, L.min_chunk);
    s.big_items = warp_sum(s.big_items);
    s.small_items = warp_sum(s.small_items);
    s.big_max = warp_max(s.big_max);
    s.small_max = warp_max(s.small_max);
    if (lane == 0) {
      cand_est[warp] = uniform_estimate(s, L);
      cand_chunk[warp] = chunk;
    }
  }
  __syncthreads();
  if (tid == 0) {  // ties: the earlier candidate, as plan_step
    long long best = cand_est[0];
    std::int32_t chunk = cand_chunk[0];
    for (int c = 1; c < candidates; ++c)
      if (cand_est[c] < best) {
        best = cand_est[c];
        chunk = cand_chunk[c];
      }
    best_est_s = best;
    best_chunk_s = chunk;
  }
  // 3. The balanced plan.
  const long long parts = plan_parts(L);
  long long cost_total = 0;
  long long at = block_exclusive_scan(my_cost, scratch64, &cost_total);
  int mine = 0;
  {
    long long a = at;
    for (int gi = g0; gi < g1; ++gi) {
      mine += balanced_group(p.spans[gi], gi, a, total, parts, L, 0, nullptr, nullptr, nullptr);
      a += group_cost(p.spans[gi], L);
    }
  }
  int count = 0;
  int item = block_exclusive_scan(mine, scratch32, &count);
  if (count > p.capacity || parts > p.capacity) {
    if (tid == 0) atomicExch(p.error, 1);
    return;
  }
  if (tid == 0) p.dispatch[0].first = 0;
  for (int gi = g0; gi < g1; ++gi) {
    item += balanced_group(p.spans[gi], gi, at, total, parts, L, item, p.items, p.dispatch,
                           p.merge_plan + gi);
    at += group_cost(p.spans[gi], L);
  }
  __syncthreads();
  long long largest = 0;
  for (long long k = tid; k < parts; k += kPlanThreads) {
    DispatchEntry& e = p.dispatch[k];
    e.last = k + 1 < parts ? p.dispatch[k + 1].first : count;
    const long long c = entry_cost(e, p.items, L);
    largest = c > largest ? c : largest;
  }
  largest = block_reduce<true>(largest, scratch64);
  PlanChoice choice{PlanKind::balanced, 0, count, static_cast<std::int32_t>(parts),
                    balanced_makespan(largest, L)};
  // 4. The uniform plan, when its estimate is better (best_est_s is block-uniform here).
  if (best_est_s < choice.makespan) {
    const std::int32_t chunk = best_chunk_s;
    int all_mine = 0, big_mine = 0;
    for (int gi = g0; gi < g1; ++gi) {
      all_mine += static_cast<int>(group_items(p.spans[gi], chunk, L.min_chunk, 0));
      big_mine += static_cast<int>(group_items(p.spans[gi], chunk, L.min_chunk, 1));
    }
    int all = 0, big = 0;
    int at_item = block_exclusive_scan(all_mine, scratch32, &all);
    int at_big = block_exclusive_scan(big_mine, scratch32, &big);
    if (all > p.capacity) {
      if (tid == 0) atomicExch(p.error, 1);
      return;
    }
    int at_small = big + at_item - at_big;
    for (int gi = g0; gi < g1; ++gi) {
      uniform_group(p.spans[gi], gi, chunk, L.min_chunk, at_item, at_big, at_small, p.items,
                    p.dispatch, p.merge_plan + gi);
      const int a = static_cast<int>(group_items(p.spans[gi], chunk, L.min_chunk, 0));
      const int b = static_cast<int>(group_items(p.spans[gi], chunk, L.min_chunk, 1));
      at_item += a;
      at_big += b;
      at_small += a - b;
    }
    choice = PlanChoice{PlanKind::uniform, chunk, all, all, best_est_s};
  }
  if (tid == 0) {
    *p.choice = choice;
    *p.work_counter = 0;
  }
}

}  // namespace

cudaError_t launch_plan(const PlanParams& p, cudaStream_t stream) {
  plan_kernel<<<1, kPlanThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mactune::cuda
