// The planner of kernels/plan.h run serially: the CPU engine's planner, and the reference the
// CUDA plan kernel (the same functions in parallel, kernels/cuda/plan_kernel.cu) must equal.
// Pointer-based and allocation-free, callable on the device too (tests run it in a graph).
#pragma once

#include <cstdint>

#include "kernels/plan.h"

namespace mactune {

// Items of all groups at `chunk` (family 0: all, 1: big only).
MACTUNE_HD inline std::int64_t plan_items_at(const GroupSpan* g, std::int32_t n, std::int32_t chunk,
                                             std::int32_t min_chunk, int family) {
  std::int64_t total = 0;
  for (std::int32_t i = 0; i < n; ++i) total += group_items(g[i], chunk, min_chunk, family);
  return total;
}

// Smallest chunk in [r.lo, r.hi] whose items fit r.budget; r.hi when none does.
MACTUNE_HD inline std::int32_t smallest_fitting_chunk(const GroupSpan* g, std::int32_t n,
                                                      const ChunkRange& r) {
  std::int32_t lo = r.lo, hi = r.hi;
  if (plan_items_at(g, n, hi, r.lo, r.family) > r.budget) return hi;
  while (lo < hi) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    if (plan_items_at(g, n, mid, r.lo, r.family) <= r.budget)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Plans a step into fixed-size arrays: items[capacity], merge_plan[n], dispatch[capacity]
// (capacity >= plan_capacity(n, l)). Returns the choice; choice.items = -1 when capacity is
// too small. Entries past choice.entries and items past choice.items are left as they were.
MACTUNE_HD inline PlanChoice plan_step(const GroupSpan* g, std::int32_t n, const PlanLimits& l,
                                       WorkItem* items, GroupItems* merge_plan,
                                       DispatchEntry* dispatch, std::int32_t capacity) {
  PlanChoice choice;
  std::int32_t longest = 1;
  std::int64_t total = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t s = longest_segment(g[i]);
    longest = s > longest ? s : longest;
    total += group_cost(g[i], l);
  }
  if (total == 0) {  // nothing to read
    for (std::int32_t i = 0; i < n; ++i) merge_plan[i] = GroupItems{};
    return choice;
  }
  // The best uniform candidate by its estimate (ties: the earlier candidate).
  std::int64_t best_est = -1;
  std::int32_t best_chunk = l.min_chunk;
  const int candidates = l.min_chunk >= longest ? 1 : 2 * l.max_waves;
  for (int c = 0; c < candidates; ++c) {
    const std::int32_t chunk = l.min_chunk >= longest
                                   ? l.min_chunk
                                   : smallest_fitting_chunk(g, n, candidate_range(c, longest, l));
    UniformStats s;
    for (std::int32_t i = 0; i < n; ++i) s.add(g[i], chunk, l.min_chunk);
    const std::int64_t est = uniform_estimate(s, l);
    if (best_est < 0 || est < best_est) {
      best_est = est;
      best_chunk = chunk;
    }
  }
  // The balanced plan, written out: its makespan is exact, not estimated.
  const std::int64_t parts = plan_parts(l);
  std::int32_t count = 0;
  std::int64_t at = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    count += balanced_group(g[i], i, at, total, parts, l, 0, nullptr, nullptr, nullptr);
    at += group_cost(g[i], l);
  }
  if (count > capacity || parts > capacity) {
    choice.items = -1;
    return choice;
  }
  count = 0;
  at = 0;
  dispatch[0].first = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    count += balanced_group(g[i], i, at, total, parts, l, count, items, dispatch, merge_plan + i);
    at += group_cost(g[i], l);
  }
  std::int64_t largest = 0;
  for (std::int64_t k = 0; k < parts; ++k) {
    dispatch[k].last = k + 1 < parts ? dispatch[k + 1].first : count;
    const std::int64_t c = entry_cost(dispatch[k], items, l);
    largest = c > largest ? c : largest;
  }
  choice.kind = PlanKind::balanced;
  choice.items = count;
  choice.entries = static_cast<std::int32_t>(parts);
  choice.makespan = balanced_makespan(largest, l);
  if (best_est >= choice.makespan) return choice;

  // The uniform plan wins: big items dispatched first, each group's in plan order.
  std::int64_t all = 0, big = 0;
  for (std::int32_t i = 0; i < n; ++i) {
    all += group_items(g[i], best_chunk, l.min_chunk, 0);
    big += group_items(g[i], best_chunk, l.min_chunk, 1);
  }
  if (all > capacity) {
    choice.items = -1;
    return choice;
  }
  std::int32_t item = 0, big_at = 0, small_at = static_cast<std::int32_t>(big);
  for (std::int32_t i = 0; i < n; ++i) {
    const auto b = static_cast<std::int32_t>(group_items(g[i], best_chunk, l.min_chunk, 1));
    const auto a = static_cast<std::int32_t>(group_items(g[i], best_chunk, l.min_chunk, 0));
    uniform_group(g[i], i, best_chunk, l.min_chunk, item, big_at, small_at, items, dispatch,
                  merge_plan + i);
    item += a;
    big_at += b;
    small_at += a - b;
  }
  choice.kind = PlanKind::uniform;
  choice.chunk = best_chunk;
  choice.items = static_cast<std::int32_t>(all);
  choice.entries = choice.items;
  choice.makespan = best_est;
  return choice;
}

}  // namespace mactune
