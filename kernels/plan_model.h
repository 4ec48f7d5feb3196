// Host-side planning: a step's plan in owned arrays, and the model of its schedule that the
// load-balance tests check (tests/kernels/test_plan_balance.cpp): workers take dispatch entries
// by the dispatch rule of kernels/plan.h (first_claim, next_claim), an item costs item_cost +
// tokens x token_cost. The CUDA attend kernel and the CPU pool apply the same rule, so the
// model cannot drift from them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <span>
#include <vector>

#include "kernels/error.h"
#include "kernels/plan_serial.h"

namespace mactune {

struct HostPlan {
  PlanChoice choice;
  std::vector<WorkItem> items;          // [choice.items]
  std::vector<GroupItems> groups;       // [groups]
  std::vector<DispatchEntry> dispatch;  // [choice.entries]
};

inline void check_plan_input(std::span<const GroupSpan> groups, const PlanLimits& l) {
  MACTUNE_CHECK(
      l.workers >= 1 && l.max_waves >= 1 && l.max_waves <= 16 && l.parts_per_worker >= 1 &&
          l.min_chunk >= 1 && l.token_cost >= 1 && l.item_cost >= 0,
      "plan limits: workers ", l.workers, ", max_waves ", l.max_waves, ", parts_per_worker ",
      l.parts_per_worker, ", min_chunk ", l.min_chunk, ", costs ", l.token_cost, "/", l.item_cost);
  MACTUNE_CHECK(groups.size() <= (1u << 28), groups.size(), " groups");
  for (const GroupSpan& g : groups)
    MACTUNE_CHECK(0 <= g.begin && g.begin <= g.cache_end && g.cache_end <= g.kv_len,
                  "bad group span [", g.begin, ", ", g.cache_end, ", ", g.kv_len, ") of request ",
                  g.batch_index, ", KV head ", g.kv_head);
}

// Plans a step (kernels/plan_serial.h) into owned arrays.
inline HostPlan make_plan(std::span<const GroupSpan> groups, const PlanLimits& l) {
  check_plan_input(groups, l);
  const auto n = static_cast<std::int32_t>(groups.size());
  const std::int32_t capacity = plan_capacity(n, l);
  HostPlan p;
  p.items.resize(static_cast<std::size_t>(capacity));
  p.groups.resize(groups.size());
  p.dispatch.resize(static_cast<std::size_t>(capacity));
  p.choice =
      plan_step(groups.data(), n, l, p.items.data(), p.groups.data(), p.dispatch.data(), capacity);
  MACTUNE_CHECK(p.choice.items >= 0, "a plan overflowed its capacity ", capacity);
  p.items.resize(static_cast<std::size_t>(p.choice.items));
  p.dispatch.resize(static_cast<std::size_t>(p.choice.entries));
  return p;
}

// The schedule of a plan: worker c starts entry first_claim(c); whichever worker finishes first
// claims entry next_claim(workers, ticket) with the next ticket (ties do not change the
// makespan: the workers are equal). Returns the makespan in cost units.
inline std::int64_t simulate_dispatch(const HostPlan& p, const PlanLimits& l) {
  using Slot = std::pair<std::int64_t, std::int32_t>;  // (free at, worker)
  std::priority_queue<Slot, std::vector<Slot>, std::greater<>> free_at;
  const auto entries = static_cast<std::int32_t>(p.dispatch.size());
  std::int64_t makespan = 0;
  for (std::int32_t w = 0; w < l.workers; ++w) {
    const std::int32_t e = first_claim(w);
    const std::int64_t t = e < entries ? entry_cost(p.dispatch[e], p.items.data(), l) : 0;
    makespan = std::max(makespan, t);
    free_at.push({t, w});
  }
  for (std::int32_t ticket = 0;; ++ticket) {
    const std::int32_t e = next_claim(l.workers, ticket);
    if (e >= entries) break;
    const Slot s = free_at.top();
    free_at.pop();
    const std::int64_t t = s.first + entry_cost(p.dispatch[e], p.items.data(), l);
    makespan = std::max(makespan, t);
    free_at.push({t, s.second});
  }
  return makespan;
}

// The numbers the load-balance criterion is stated in.
struct PlanStats {
  std::int64_t makespan = 0;      // simulate_dispatch
  std::int64_t total = 0;         // sum of item costs
  std::int64_t largest_item = 0;  // cost of the largest item
  std::int64_t tokens = 0;        // every span token once
  double bound = 0.0;             // max(total / workers, largest item): no schedule beats it
  double ratio() const { return bound > 0 ? static_cast<double>(makespan) / bound : 1.0; }
};

inline PlanStats plan_stats(std::span<const GroupSpan> groups, const HostPlan& p,
                            const PlanLimits& l) {
  PlanStats s;
  for (const GroupSpan& g : groups) s.tokens += g.kv_len - g.begin;
  for (const WorkItem& w : p.items) {
    const std::int64_t c = item_cost_of(w.kv_end - w.kv_begin, l);
    s.total += c;
    s.largest_item = std::max(s.largest_item, c);
  }
  s.makespan = simulate_dispatch(p, l);
  s.bound = std::max(static_cast<double>(s.total) / l.workers, static_cast<double>(s.largest_item));
  return s;
}

}  // namespace mactune
