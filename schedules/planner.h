// The planner's policy: how many workers a decode step may fill (CUDA: resident CTAs =
// occupancy x SMs; CPU: threads), what an item costs (tokens x per-token cost + per-item
// overhead), the wave-quantized chunk choice over the primitives of kernels/plan.h, and the
// statistics that say how good a plan is (its makespan against the ideal).
//
// One planner serves CPU threads and CUDA CTAs. The algorithm itself (chunk search, emission,
// merge ranges, fixed-size padded arrays) lives in kernels/plan.h so a CUDA decode step can run
// it on the device inside a CUDA graph; this layer only chooses its numbers and measures it.
//
//   sched::PlanPolicy policy{sched::cuda_budget(132, 4), sched::CostModel{1.0, 128.0}, 128};
//   sched::StepPlan p = sched::plan_step(sched::group_spans(result.groups, kv_heads), policy);
//   sched::PlanStats s = sched::plan_stats(spans, p.plan, policy);   // s.efficiency()
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/plan.h"
#include "kernels/problem.h"
#include "kernels/stats.h"

namespace mactune::sched {

// How many items run at once, and how many rounds of them a plan may hold.
struct WorkerBudget {
  int workers = 1;    // concurrent items: resident CTAs of the attend kernel, or CPU threads
  int max_waves = 1;  // the plan holds at most workers * max_waves items
};

// CUDA: `blocks_per_sm` is the attend kernel's occupancy at its launch configuration, as
// cudaOccupancyMaxActiveBlocksPerMultiprocessor reports it; resident CTAs = that x SMs.
WorkerBudget cuda_budget(int sm_count, int blocks_per_sm, int max_waves = 8);
// CPU: one worker per thread of the pool; `max_waves` items per thread at most, so a thread
// that drew short items takes another (the pool pulls items dynamically).
WorkerBudget cpu_budget(int threads, int max_waves = 32);

// Cost of one work item: tokens x per_token + per_item, in any one unit (only the ratio
// matters). per_item covers starting the item and writing and merging its partial state
// (G heads x (D + 1) floats). The defaults count KV-token equivalents with an overhead of 128
// tokens, the value the MAC reference's persistent kernel plans with; engines calibrate it.
struct CostModel {
  double per_token = 1.0;
  double per_item = 128.0;
  double item(std::int64_t tokens) const {
    return static_cast<double>(tokens) * per_token + per_item;
  }
};

struct PlanPolicy {
  WorkerBudget budget;
  CostModel cost;
  int min_chunk = 128;  // tokens: no item shorter unless its segment is (CPU: chunk_tokens)

  PlanLimits limits() const;
};

// A host plan with its predicted schedule and the capacity its fixed-size arrays need.
struct StepPlan {
  Plan plan;                  // items and the per-group merge plan (kernels/plan.h)
  ChunkChoice predicted;      // chunk, items, waves, predicted makespan
  std::int32_t capacity = 0;  // plan_capacity(groups, limits): the padded array length
};

// The GroupSpans of a step from its groups ([batch rows x kv_heads], as account_request()
// appends them: row-major by request, then KV head).
std::vector<GroupSpan> group_spans(std::span<const GroupInfo> groups, int kv_heads);

// Plans a step: validates the spans, chooses the chunk by wave count (choose_chunk_waves) and
// emits the items and the merge plan. Throws mactune::Error on a malformed span or policy.
StepPlan plan_step(std::span<const GroupSpan> groups, const PlanPolicy& policy);

// The same plan in budget-padded arrays, as a graph-captured step would hold them: `items` has
// exactly `capacity` slots, those past the plan are padding (kernels/plan.h is_padding).
struct PaddedPlan {
  std::vector<WorkItem> items;     // [capacity]
  std::vector<GroupItems> groups;  // [groups]
  ChunkChoice predicted;           // predicted.items = the slots in use
};
PaddedPlan plan_padded(std::span<const GroupSpan> groups, const PlanPolicy& policy);

// How good a plan is on `workers` workers under the cost model.
struct PlanStats {
  std::int32_t groups = 0, items = 0, workers = 0, chunk = 0;
  std::int64_t tokens = 0;        // sum of span lengths: every token once
  std::int64_t largest_item = 0;  // tokens of the longest item
  double largest_item_cost = 0.0;
  // Lower bound on any plan's makespan: max(tokens x per_token / workers + per_item,
  // the cost of the shortest item allowed, min(min_chunk, longest segment)).
  double lower_bound = 0.0;
  double ideal = 0.0;                  // tokens x per_token / workers: perfect balance, no overhead
  double planned = 0.0;                // list-scheduled makespan: workers take items in plan order
  double planned_longest_first = 0.0;  // the same, items taken longest first
  double predicted = 0.0;  // the bound that chose the chunk (kernels/plan.h predict_chunk)
  double efficiency() const { return planned > 0.0 ? ideal / planned : 1.0; }
};
PlanStats plan_stats(std::span<const GroupSpan> groups, const Plan& plan, const PlanPolicy& policy);

// Makespan of list scheduling: each of `workers` workers, when free, takes the next item in
// order (what a CPU pool pulling items, and the CUDA block scheduler over a grid, do).
double list_makespan(std::span<const WorkItem> items, const CostModel& cost, int workers);

}  // namespace mactune::sched
