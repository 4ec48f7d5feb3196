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

MACTUNE_HD inline std::int64_t plan_item_count(const GroupSpan* groups, std::int32_t n,
                                               std::int32_t chunk) {
  std::int64_t total = 0;
  for (std::int32_t i = 0; i < n; ++i) total += group_item_count(groups[i], chunk);
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
