// Work planning primitives: split each (request, KV head) group's span into chunks of work.
//
// These are pure functions over fixed-size arrays, callable on the host and on the device, so
// that a CUDA decode step can plan inside a CUDA graph (no host round trip) with the same
// algorithm the CPU engine and the host planner (schedules/) use. Layering: the kernels layer
// needs the algorithm on the device, so it lives here; schedules/ owns the policy around it
// (worker budgets from occupancy or threads, cost models, plan statistics).
//
// Items of a group never straddle cache_end(m): the items below it form the new ring entry
// (merged in order), the items above it are the tail. Chunks start at the group's begin.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/config.h"
#include "kernels/error.h"

namespace mactune {

// One (request, KV head) group of a decode step.
struct GroupSpan {
  std::int32_t batch_index = 0;  // row of the request in the step's batch
  std::int32_t kv_head = 0;
  std::int32_t begin = 0;      // first position any head of the group reads: min_h start_h
  std::int32_t cache_end = 0;  // cache_end(m): the ring snapshot boundary, begin <= cache_end
  std::int32_t kv_len = 0;     // m + 1
};

// All G heads of one group over [kv_begin, kv_end): one CPU task or one CUDA CTA.
struct WorkItem {
  std::int32_t group = 0;  // index into the GroupSpan array
  std::int32_t batch_index = 0;
  std::int32_t kv_head = 0;
  std::int32_t kv_begin = 0;
  std::int32_t kv_end = 0;
};

// Merge plan of one group: items [first, split) lie below cache_end and, merged in order
// (after the ring summary on a hit), give the new ring entry; items [split, last) are the
// tail, merged after it into the output. Heads mask below their own start, so an item wholly
// below a head's start yields an empty partial for that head.
struct GroupItems {
  std::int32_t first = 0, split = 0, last = 0;
};

MACTUNE_HD inline std::int32_t chunks_of(std::int32_t len, std::int32_t chunk) {
  return len <= 0 ? 0 : (len + chunk - 1) / chunk;
}

// Items a group needs at chunk size `chunk`.
MACTUNE_HD inline std::int32_t group_item_count(const GroupSpan& g, std::int32_t chunk) {
  return chunks_of(g.cache_end - g.begin, chunk) + chunks_of(g.kv_len - g.cache_end, chunk);
}

// floor(x / d) for many x and one d, as a multiply-high instead of a division (Lemire, Kaser
// and Kurz, "Faster remainder by direct computation", 2019): exact for all 32-bit x and d >= 1.
// The chunk search divides every segment by the same chunk, dozens of times a plan.
#if !defined(__CUDA_ARCH__)
__extension__ typedef unsigned __int128
    plan_uint128_t;  // GCC/Clang: not ISO C++, hence __extension__
#endif
struct ChunkDivider {
  std::uint64_t m = 0;  // ceil(2^64 / d); 0 stands for d = 1
  MACTUNE_HD explicit ChunkDivider(std::uint32_t d) : m(d > 1 ? ~std::uint64_t{0} / d + 1 : 0) {}
  MACTUNE_HD std::uint32_t divide(std::uint32_t x) const {
    if (m == 0) return x;
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint32_t>(__umul64hi(m, x));
#else
    return static_cast<std::uint32_t>((static_cast<plan_uint128_t>(m) * x) >> 64);
#endif
  }
};

MACTUNE_HD inline std::int64_t plan_item_count(const GroupSpan* groups, std::int32_t n,
                                               std::int32_t chunk) {
  // chunks_of for every segment, with one reciprocal: ceil(len / c) = floor((len + c - 1) / c).
  const ChunkDivider div(static_cast<std::uint32_t>(chunk));
  const std::uint32_t up = static_cast<std::uint32_t>(chunk) - 1;
  std::int64_t total = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t a = groups[i].cache_end - groups[i].begin;
    const std::int32_t b = groups[i].kv_len - groups[i].cache_end;
    total += (a > 0 ? div.divide(static_cast<std::uint32_t>(a) + up) : 0) +
             (b > 0 ? div.divide(static_cast<std::uint32_t>(b) + up) : 0);
  }
  return total;
}

// An upper bound on the items of any plan of n groups that respects `budget`: the capacity
// of the fixed-size arrays a graph-captured plan writes into.
MACTUNE_HD inline std::int32_t plan_capacity(std::int32_t n, std::int32_t budget) {
  return budget > 2 * n ? budget : 2 * n;
}

// Smallest chunk >= min_chunk whose plan has at most `budget` items (binary search; the item
// count does not grow with the chunk). If none fits, the longest segment: 1 or 2 items a group.
MACTUNE_HD inline std::int32_t choose_chunk(const GroupSpan* groups, std::int32_t n,
                                            std::int32_t budget, std::int32_t min_chunk) {
  std::int32_t longest = 1;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t a = groups[i].cache_end - groups[i].begin;
    const std::int32_t b = groups[i].kv_len - groups[i].cache_end;
    longest = a > longest ? a : longest;
    longest = b > longest ? b : longest;
  }
  std::int32_t lo = min_chunk < 1 ? 1 : min_chunk;
  if (lo >= longest) return lo;
  std::int32_t hi = longest;  // always fits the "1 or 2 items a group" bound
  if (plan_item_count(groups, n, hi) > budget) return hi;
  while (lo < hi) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (plan_item_count(groups, n, mid) <= budget)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Writes the items of all groups at chunk size `chunk` and the per-group merge plan.
// Returns the item count, or -1 if it would exceed `capacity` (nothing past it is written).
MACTUNE_HD inline std::int32_t emit_plan(const GroupSpan* groups, std::int32_t n,
                                         std::int32_t chunk, WorkItem* items,
                                         GroupItems* merge_plan, std::int32_t capacity) {
  std::int32_t count = 0;
  for (std::int32_t gi = 0; gi < n; ++gi) {
    const GroupSpan& g = groups[gi];
    GroupItems& mp = merge_plan[gi];
    mp.first = count;
    for (int seg = 0; seg < 2; ++seg) {
      if (seg == 1) mp.split = count;
      const std::int32_t lo = seg == 0 ? g.begin : g.cache_end;
      const std::int32_t hi = seg == 0 ? g.cache_end : g.kv_len;
      for (std::int32_t b = lo; b < hi; b += chunk) {
        if (count >= capacity) return -1;
        items[count++] = WorkItem{gi, g.batch_index, g.kv_head, b, b + chunk < hi ? b + chunk : hi};
      }
    }
    mp.last = count;
  }
  return count;
}

// Which positions of a group's items a head with its own `start` (>= g.begin) needs: the first
// item holding a position >= start. The items before it are wholly below the head's start and
// yield empty partials, so a per-head merge may begin there. Returns mp.last when start >= kv_len.
MACTUNE_HD inline std::int32_t first_item_at(const GroupSpan& g, const GroupItems& mp,
                                             std::int32_t chunk, std::int32_t start) {
  if (start <= g.begin) return mp.first;
  if (start >= g.kv_len) return mp.last;
  if (start < g.cache_end) return mp.first + (start - g.begin) / chunk;
  return mp.split + (start - g.cache_end) / chunk;
}

// ---- Wave-quantized planning: the policy's numbers in, a chunk and fixed-size arrays out.

// What the planner may use and what work costs (filled by the policy, schedules/planner.h).
// Costs are in any one unit (ns, or KV-token equivalents): only their ratio matters.
struct PlanLimits {
  std::int32_t workers = 1;    // items that run at once: resident CTAs, or CPU threads
  std::int32_t max_waves = 1;  // at most workers * max_waves items, when the spans allow it
  std::int32_t min_chunk = 1;  // no item shorter than this unless its segment is
  double token_cost = 1.0;     // one KV position of one group (all G heads)
  double item_cost = 0.0;      // fixed cost of one item: its start, its partial state and merge
};

// The predicted schedule of a chunk size. The prediction is a guaranteed bound on the makespan
// of list scheduling (workers take the next item when free, as a CPU pool and the CUDA block
// scheduler do), the smaller of two bounds that hold in any item order, p = the largest item:
//   waves:  ceil(items / workers) * p                  (tight when items are alike)
//   Graham: sum of item costs / workers + (1 - 1/workers) * p   (tight when they are not)
struct ChunkChoice {
  std::int32_t chunk = 0;
  std::int32_t items = 0;
  std::int32_t waves = 0;  // ceil(items / workers)
  double makespan = 0.0;   // the bound above, in the cost model's unit
};

// Items the arrays of a plan under `limits` must hold (plan_capacity of its item budget).
MACTUNE_HD inline std::int32_t plan_capacity(std::int32_t n, const PlanLimits& limits) {
  return plan_capacity(n, limits.workers * limits.max_waves);
}

// The ChunkChoice of chunk size `chunk` (see above).
MACTUNE_HD inline ChunkChoice predict_chunk(const GroupSpan* groups, std::int32_t n,
                                            const PlanLimits& limits, std::int32_t chunk) {
  const std::int32_t workers = limits.workers < 1 ? 1 : limits.workers;
  std::int64_t items = 0, tokens = 0;
  std::int32_t largest = 0;  // tokens of the largest item: min(chunk, longest segment)
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t a = groups[i].cache_end - groups[i].begin;
    const std::int32_t b = groups[i].kv_len - groups[i].cache_end;
    tokens += a + b;
    const std::int32_t la = a < chunk ? a : chunk, lb = b < chunk ? b : chunk;
    largest = la > largest ? la : largest;
    largest = lb > largest ? lb : largest;
  }
  items = plan_item_count(groups, n, chunk);
  ChunkChoice c;
  c.chunk = chunk;
  c.items = static_cast<std::int32_t>(items);
  c.waves = static_cast<std::int32_t>((items + workers - 1) / workers);
  if (items == 0) return c;
  const double p = largest * limits.token_cost + limits.item_cost;
  const double work = tokens * limits.token_cost + items * limits.item_cost;
  const double waves = c.waves * p;
  const double graham = work / workers + (1.0 - 1.0 / workers) * p;
  c.makespan = waves < graham ? waves : graham;
  return c;
}

// For each wave count w in [1, max_waves], the smallest chunk whose plan fits w * workers items
// (binary search); keeps the one with the smallest makespan bound, the fewest waves on a tie.
// Rounding to whole waves is what beats "the smallest chunk that fits": 1.2 waves of items
// cost 2 waves, and a slightly larger chunk that fits in 1 wave is faster; while many short
// segments (which make items unequal) favour more, smaller items.
MACTUNE_HD inline ChunkChoice choose_chunk_waves(const GroupSpan* groups, std::int32_t n,
                                                 const PlanLimits& limits) {
  const std::int32_t workers = limits.workers < 1 ? 1 : limits.workers;
  const std::int32_t max_waves = limits.max_waves < 1 ? 1 : limits.max_waves;
  const std::int32_t min_chunk = limits.min_chunk < 1 ? 1 : limits.min_chunk;
  std::int64_t tokens = 0;
  for (std::int32_t i = 0; i < n; ++i) tokens += groups[i].kv_len - groups[i].begin;
  // w = 1 is choose_chunk itself; each later search is narrowed to [a, previous chunk]: the
  // chunk does not grow with the item budget, and a plan of c-token chunks has at least
  // tokens / c items, so c >= tokens / budget.
  std::int32_t chunk = choose_chunk(groups, n, workers, min_chunk);
  ChunkChoice best = predict_chunk(groups, n, limits, chunk);
  for (std::int32_t w = 2; w <= max_waves && chunk > min_chunk; ++w) {
    const std::int64_t budget = static_cast<std::int64_t>(w) * workers;
    if (plan_item_count(groups, n, chunk - 1) > budget) continue;  // the same plan as before
    const std::int64_t floor_chunk = (tokens + budget - 1) / budget;
    std::int32_t lo = floor_chunk > min_chunk ? static_cast<std::int32_t>(floor_chunk) : min_chunk;
    std::int32_t hi = chunk - 1;  // fits, checked above
    if (lo > hi) lo = hi;
    while (lo < hi) {
      const std::int32_t mid = lo + (hi - lo) / 2;
      if (plan_item_count(groups, n, mid) <= budget)
        hi = mid;
      else
        lo = mid + 1;
    }
    chunk = lo;
    const ChunkChoice c = predict_chunk(groups, n, limits, chunk);
    if (c.makespan < best.makespan) best = c;
  }
  return best;
}

// Marks an unused slot of fixed-size plan arrays: a kernel launched over the whole capacity
// (a CUDA graph's fixed grid) returns at once for it.
MACTUNE_HD inline bool is_padding(const WorkItem& w) {
  return w.group < 0;
}

// Plans into fixed-size arrays without allocating: items[capacity] (capacity >=
// plan_capacity(n, limits)) and merge_plan[n]. Slots past the plan are padding. Returns the
// predicted choice; choice.items is the item count, or -1 when capacity is too small.
MACTUNE_HD inline ChunkChoice plan_into(const GroupSpan* groups, std::int32_t n,
                                        const PlanLimits& limits, WorkItem* items,
                                        GroupItems* merge_plan, std::int32_t capacity) {
  ChunkChoice c = choose_chunk_waves(groups, n, limits);
  const std::int32_t count = emit_plan(groups, n, c.chunk, items, merge_plan, capacity);
  if (count < 0) {
    c.items = -1;
    return c;
  }
  for (std::int32_t i = count; i < capacity; ++i) items[i] = WorkItem{-1, -1, -1, 0, 0};
  return c;
}

// An execution order: item indices longest first, ties in plan order. Workers that take items
// in this order (longest processing time first) finish within 4/3 of the optimal makespan; in
// plan order a long item drawn last can run alone at the end. On the skewed steps of
// tests/schedules it takes a CPU pool of 32 threads from 1.07-1.09x the lower bound to
// 1.002x at batch 64. Host only (a sort); the merge plan is unaffected (it indexes items).
inline std::vector<std::int32_t> order_longest_first(std::span<const WorkItem> items) {
  std::vector<std::uint64_t> keys(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    // Longer first: sort ascending on (max_len - len, index).
    const auto len = static_cast<std::uint32_t>(items[i].kv_end - items[i].kv_begin);
    keys[i] = (std::uint64_t{~len} << 32) | static_cast<std::uint32_t>(i);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::int32_t> order(items.size());
  for (std::size_t i = 0; i < keys.size(); ++i)
    order[i] = static_cast<std::int32_t>(keys[i] & 0xffffffffu);
  return order;
}

// A host-side plan: the same arrays, owned.
struct Plan {
  std::int32_t chunk = 0;
  std::vector<WorkItem> items;
  std::vector<GroupItems> groups;
};

// The simple planner: smallest chunk (>= min_chunk) that keeps the items within `budget`.
inline Plan make_simple_plan(std::span<const GroupSpan> groups, std::int32_t budget,
                             std::int32_t min_chunk) {
  MACTUNE_CHECK(budget >= 1, "budget = ", budget);
  const auto n = static_cast<std::int32_t>(groups.size());
  for (const GroupSpan& g : groups)
    MACTUNE_CHECK(0 <= g.begin && g.begin <= g.cache_end && g.cache_end <= g.kv_len,
                  "bad group span [", g.begin, ", ", g.cache_end, ", ", g.kv_len, ")");
  Plan plan;
  plan.chunk = choose_chunk(groups.data(), n, budget, min_chunk);
  const std::int64_t count = plan_item_count(groups.data(), n, plan.chunk);
  plan.items.resize(static_cast<std::size_t>(count));
  plan.groups.resize(groups.size());
  const std::int32_t written = emit_plan(groups.data(), n, plan.chunk, plan.items.data(),
                                         plan.groups.data(), static_cast<std::int32_t>(count));
  MACTUNE_CHECK(written == count, "planned ", count, " items, wrote ", written);
  return plan;
}

}  // namespace mactune
