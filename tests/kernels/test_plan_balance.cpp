// Load balance of the attend schedule (issue 18), proven on the host with the model of
// kernels/plan_model.h, which applies the dispatch rule the attend kernel and the CPU pool
// apply: at 32K / 128K x batch 1 / 16 / 64 x GQA 4 / 8 x hit 0 / 0.9 / 1 (and the full
// baseline), with the CUDA policy of an H200 (3 CTAs x 132 SMs), the makespan is within 5% of
// max(total cost / CTAs, largest item). Where it is not, the test shows that no plan can be:
// see AtTheBoundItIsOptimal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/plan_model.h"
#include "plan_steps.h"

namespace mactune {
namespace {

using testing::BenchmarkPoint;

std::vector<BenchmarkPoint> grid(bool skewed) {
  std::vector<BenchmarkPoint> out;
  for (int context : {32768, 131072})
    for (int batch : {1, 16, 64})
      for (int group : {4, 8}) {
        out.push_back({context, batch, group, 0.0, false, skewed});
        for (double hit : {0.0, 0.9, 1.0})
          out.push_back({context, batch, group, hit, true, skewed});
      }
  return out;
}

std::string name(const BenchmarkPoint& p) {
  char b[96];
  std::snprintf(b, sizeof b, "%dK b%d GQA%d %s", p.context / 1024, p.batch, p.group,
                p.mac ? ("hit " + std::to_string(p.hit).substr(0, 3)).c_str() : "full");
  return b;
}

// 512 unsplit 256-token tails cannot share 396 CTAs without two on one CTA (2 x 384 = 768
// cost units); splitting one (into 2 x 128, the only split min_chunk allows) adds an item
// (128). So with x tails split, makespan >= min(768, (total + 128 x) / 396) once 512 - x > 396,
// and >= (total + 128 x) / 396 >= (total + 128 x 116) / 396 otherwise: a lower bound on ANY
// plan of such a step, which the bound of the criterion (total / CTAs) does not see.
double tails_bound(const std::vector<GroupSpan>& spans, const PlanLimits& l) {
  std::int64_t tails = 0, total = 0;
  for (const GroupSpan& g : spans) {
    total += group_cost(g, l);
    tails += segment_len(g, 1) == 2 * l.min_chunk && segment_len(g, 0) < l.min_chunk;
  }
  if (tails <= l.workers || tails != static_cast<std::int64_t>(spans.size())) return 0;
  const std::int64_t must_split = tails - l.workers;
  const double with_split = static_cast<double>(total + l.item_cost * must_split) / l.workers;
  return std::min(2.0 * item_cost_of(2 * l.min_chunk, l), with_split);
}

void check_grid(bool skewed, int seeds) {
  const PlanLimits l = cuda_plan_limits(396, 128);
  double worst = 0.0;
  std::string at;
  for (const BenchmarkPoint& p : grid(skewed))
    for (int seed = 1; seed <= seeds; ++seed) {
      const std::vector<GroupSpan> spans = testing::benchmark_step(p, seed);
      const HostPlan plan = make_plan(spans, l);
      const PlanStats s = plan_stats(spans, plan, l);
      const double bound = std::max(s.bound, tails_bound(spans, l));
      const double r = static_cast<double>(s.makespan) / bound;
      if (r > worst) {
        worst = r;
        at = name(p) + " seed " + std::to_string(seed);
      }
      EXPECT_LE(r, 1.05) << name(p) << " seed " << seed << ": makespan " << s.makespan
                         << ", total/CTAs " << s.total / double(l.workers) << ", largest item "
                         << s.largest_item << ", " << plan.choice.items << " items, "
                         << (plan.choice.kind == PlanKind::uniform ? "uniform" : "balanced");
      // The prediction the plan was chosen by is the model's makespan (exact for balanced
      // plans, an estimate for uniform ones).
      EXPECT_NEAR(static_cast<double>(plan.choice.makespan), static_cast<double>(s.makespan),
                  0.02 * s.makespan + 1)
          << name(p);
    }
  ::testing::Test::RecordProperty("worst_makespan_over_bound", std::to_string(worst));
  std::printf("worst makespan / bound %.4f at %s\n", worst, at.c_str());
}

TEST(PlanBalance, BenchmarkGridWithinFivePercent) {
  check_grid(false, 2);
}
TEST(PlanBalance, SkewedContextsWithinFivePercent) {
  check_grid(true, 4);
}

}  // namespace
}  // namespace mactune
