// The planner's policy and statistics around the primitives of kernels/plan.h.
#include "schedules/planner.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "kernels/error.h"

namespace mactune::sched {
namespace {

void check_policy(const PlanPolicy& p) {
  MACTUNE_CHECK(p.budget.workers >= 1, "workers = ", p.budget.workers);
  MACTUNE_CHECK(p.budget.max_waves >= 1, "max_waves = ", p.budget.max_waves);
  // The item budget and the padded capacity are int32 everywhere (device code included).
  MACTUNE_CHECK(static_cast<std::int64_t>(p.budget.workers) * p.budget.max_waves <= (1 << 30),
                "workers x max_waves = ", p.budget.workers, " x ", p.budget.max_waves);
  MACTUNE_CHECK(p.min_chunk >= 1, "min_chunk = ", p.min_chunk);
  MACTUNE_CHECK(p.cost.per_token > 0.0 && p.cost.per_item >= 0.0, "cost model ", p.cost.per_token,
                " per token, ", p.cost.per_item, " per item");
}

void check_spans(std::span<const GroupSpan> groups) {
  MACTUNE_CHECK(groups.size() <= (1u << 29), groups.size(), " groups");
  for (const GroupSpan& g : groups)
    MACTUNE_CHECK(0 <= g.begin && g.begin <= g.cache_end && g.cache_end <= g.kv_len,
                  "bad group span [", g.begin, ", ", g.cache_end, ", ", g.kv_len, ") of request ",
                  g.batch_index, ", KV head ", g.kv_head);
}

}  // namespace

WorkerBudget cuda_budget(int sm_count, int blocks_per_sm, int max_waves) {
  MACTUNE_CHECK(sm_count >= 1 && blocks_per_sm >= 1 && max_waves >= 1, "sm_count = ", sm_count,
                ", blocks_per_sm = ", blocks_per_sm, ", max_waves = ", max_waves);
  return {sm_count * blocks_per_sm, max_waves};
}

WorkerBudget cpu_budget(int threads, int max_waves) {
  MACTUNE_CHECK(threads >= 1 && max_waves >= 1, "threads = ", threads, ", max_waves = ", max_waves);
  return {threads, max_waves};
}

PlanLimits PlanPolicy::limits() const {
  PlanLimits l;
  l.workers = budget.workers;
  l.max_waves = budget.max_waves;
  l.min_chunk = min_chunk;
  l.token_cost = cost.per_token;
  l.item_cost = cost.per_item;
  return l;
}

std::vector<GroupSpan> group_spans(std::span<const GroupInfo> groups, int kv_heads) {
  MACTUNE_CHECK(kv_heads >= 1 && groups.size() % static_cast<std::size_t>(kv_heads) == 0,
                groups.size(), " groups for ", kv_heads, " KV heads");
  std::vector<GroupSpan> spans(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const GroupInfo& g = groups[i];
    spans[i].batch_index = static_cast<std::int32_t>(i / static_cast<std::size_t>(kv_heads));
    spans[i].kv_head = static_cast<std::int32_t>(i % static_cast<std::size_t>(kv_heads));
    // A group whose heads all start past cache_end (impossible for decisions made by §1, where
    // a hit's start is cache_end(p) <= cache_end(m)) is clamped so the span stays well formed.
    spans[i].cache_end = g.cache_end;
    spans[i].begin = std::min(g.begin, g.cache_end);
    spans[i].kv_len = g.kv_len;
  }
  return spans;
}

StepPlan plan_step(std::span<const GroupSpan> groups, const PlanPolicy& policy) {
  check_policy(policy);
  check_spans(groups);
  const auto n = static_cast<std::int32_t>(groups.size());
  const PlanLimits limits = policy.limits();
  StepPlan out;
  out.predicted = choose_chunk_waves(groups.data(), n, limits);
  out.capacity = plan_capacity(n, limits);
  out.plan.chunk = out.predicted.chunk;
  out.plan.items.resize(static_cast<std::size_t>(out.predicted.items));
  out.plan.groups.resize(groups.size());
  const std::int32_t written = emit_plan(groups.data(), n, out.plan.chunk, out.plan.items.data(),
                                         out.plan.groups.data(), out.predicted.items);
  MACTUNE_CHECK(written == out.predicted.items, "planned ", out.predicted.items, " items, wrote ",
                written);
  MACTUNE_CHECK(written <= out.capacity, written, " items exceed the capacity ", out.capacity);
  return out;
}

PaddedPlan plan_padded(std::span<const GroupSpan> groups, const PlanPolicy& policy) {
  check_policy(policy);
  check_spans(groups);
  const auto n = static_cast<std::int32_t>(groups.size());
  const PlanLimits limits = policy.limits();
  PaddedPlan out;
  out.items.resize(static_cast<std::size_t>(plan_capacity(n, limits)));
  out.groups.resize(groups.size());
  out.predicted = plan_into(groups.data(), n, limits, out.items.data(), out.groups.data(),
                            static_cast<std::int32_t>(out.items.size()));
  MACTUNE_CHECK(out.predicted.items >= 0, "the plan overflowed its capacity ", out.items.size());
  return out;
}

double list_makespan(std::span<const WorkItem> items, const CostModel& cost, int workers) {
  MACTUNE_CHECK(workers >= 1, "workers = ", workers);
  // Finish times of the busy workers; the earliest to finish takes the next item.
  std::priority_queue<double, std::vector<double>, std::greater<>> finish;
  for (int w = 0; w < workers; ++w) finish.push(0.0);
  double makespan = 0.0;
  for (const WorkItem& item : items) {
    if (is_padding(item)) continue;
    const double start = finish.top();
    finish.pop();
    const double end = start + cost.item(item.kv_end - item.kv_begin);
    makespan = std::max(makespan, end);
    finish.push(end);
  }
  return makespan;
}

PlanStats plan_stats(std::span<const GroupSpan> groups, const Plan& plan,
                     const PlanPolicy& policy) {
  check_policy(policy);
  PlanStats s;
  s.groups = static_cast<std::int32_t>(groups.size());
  s.items = static_cast<std::int32_t>(plan.items.size());
  s.workers = policy.budget.workers;
  s.chunk = plan.chunk;
  std::int64_t longest_segment = 0;
  for (const GroupSpan& g : groups) {
    s.tokens += g.kv_len - g.begin;
    longest_segment = std::max<std::int64_t>(
        longest_segment, std::max(g.cache_end - g.begin, g.kv_len - g.cache_end));
  }
  for (const WorkItem& w : plan.items)
    s.largest_item = std::max<std::int64_t>(s.largest_item, w.kv_end - w.kv_begin);
  const CostModel& c = policy.cost;
  s.largest_item_cost = s.items ? c.item(s.largest_item) : 0.0;
  s.ideal = static_cast<double>(s.tokens) * c.per_token / s.workers;
  s.lower_bound = s.tokens == 0
                      ? 0.0
                      : std::max(s.ideal + c.per_item,
                                 c.item(std::min<std::int64_t>(policy.min_chunk, longest_segment)));
  s.planned = list_makespan(plan.items, c, s.workers);
  std::vector<WorkItem> lpt;
  lpt.reserve(plan.items.size());
  for (std::int32_t i : order_longest_first(plan.items))
    lpt.push_back(plan.items[static_cast<std::size_t>(i)]);
  s.planned_longest_first = list_makespan(lpt, c, s.workers);
  s.predicted = predict_chunk(groups.data(), s.groups, policy.limits(), plan.chunk).makespan;
  return s;
}

}  // namespace mactune::sched
