// Planned vs ideal makespan of the planner on random skewed steps (issue 4), as a markdown
// table: for each skip-ratio sigma, batch and worker budget, over `trials` random steps, the
// median and worst planned / ideal makespan (list-scheduled under the cost model), the worst
// largest item / lower bound, the median item count and chunk, and the wave model's error.
//   plan_table [trials=50] [seed=1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "schedules/planner.h"
#include "skewed_spans.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mactune::sched;
  const int trials = argc > 1 ? std::atoi(argv[1]) : 50;
  const unsigned long long seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  struct Budget {
    const char* name;
    PlanPolicy policy;
  };
  const Budget budgets[] = {
      {"cuda 132 SMs x 4", {cuda_budget(132, 4), CostModel{1.0, 128.0}, 128}},
      {"cuda 108 SMs x 2", {cuda_budget(108, 2), CostModel{1.0, 128.0}, 128}},
      {"cpu 2 threads", {cpu_budget(2), CostModel{1.0, 64.0}, 256}},
      {"cpu 32 threads", {cpu_budget(32), CostModel{1.0, 64.0}, 256}},
  };
  std::printf(
      "| sigma | batch | budget | planned/LB median | worst | planned/ideal median | LPT/LB median "
      "| largest item/LB worst | items | chunk | waves | bound/planned | plan us |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::mt19937_64 rng(seed);
  for (double sigma : {0.1, 0.2, 0.3}) {
    for (int batch : {1, 4, 16, 64}) {
      for (const Budget& b : budgets) {
        std::vector<double> ratio, fluid, lpt, largest, items, chunk, waves, model, micros;
        for (int t = 0; t < trials; ++t) {
          testing::SkewSpec spec;
          spec.sigma = sigma;
          spec.batch = batch;
          const auto step = testing::skewed_step(rng, spec);
          const auto t0 = std::chrono::steady_clock::now();
          const StepPlan p = plan_step(step.groups, b.policy);
          micros.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                  .count());
          const PlanStats s = plan_stats(step.groups, p.plan, b.policy);
          ratio.push_back(s.planned / s.lower_bound);
          fluid.push_back(s.planned / s.ideal);
          lpt.push_back(s.planned_longest_first / s.lower_bound);
          largest.push_back(s.largest_item_cost / s.lower_bound);
          items.push_back(s.items);
          chunk.push_back(s.chunk);
          waves.push_back(p.predicted.waves);
          model.push_back(s.predicted / s.planned);
        }
        std::printf(
            "| %.1f | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f | %.0f | %.0f | %.3f | "
            "%.0f |\n",
            sigma, batch, b.name, median(ratio), *std::max_element(ratio.begin(), ratio.end()),
            median(fluid), median(lpt), *std::max_element(largest.begin(), largest.end()),
            median(items), median(chunk), median(waves), median(model), median(micros));
      }
    }
  }
  return 0;
}
