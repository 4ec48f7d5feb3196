// The CUDA plan kernel equals the host planner (label gpu; Skipped without a GPU): the step's
// groups, planned on the host with the same policy (kernels/plan_serial.h), give the same kind,
// chunk, item and entry counts and predicted makespan as the plan kernel reported, for steps
// where the uniform plan wins (every head hits) and where the balanced one does.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_harness.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/registry.h"
#include "kernels/plan_model.h"

namespace mactune::cuda::testing {
namespace {

TEST(PlanCuda, DeviceEqualsHostPlan) {
  MACTUNE_REQUIRE_GPU();
  const AttendInstance& a = attend_instances().front();
  bool saw[2] = {false, false};
  for (double rate : {0.0, 0.6, 1.0})
    for (int batch : {1, 5, 24}) {
      SessionOptions o;
      o.shape.batch = batch;
      o.shape.kv_heads = 2;
      o.shape.q_heads = 2 * std::min(4, a.config.group);
      o.shape.head_dim = a.config.head_dim;
      o.shape.kv_dtype = a.config.kv_dtype;
      o.shape.page_size = 16;
      o.mac.ring_capacity = 256;
      o.mac.band = 64;
      o.mac.min_context = 512;
      o.forced.enabled = true;
      o.forced.hit_rate = rate;
      o.forced.lag = {LagKind::uniform, 1, 64};
      o.max_context = 9000;
      o.engine.graph = true;
      Session s(o);
      std::vector<int> ids;
      for (int r = 0; r < batch; ++r) {
        ids.push_back(s.add_request());
        s.prefill_synthetic(ids.back(), 1000 + 331 * r, 3 + r);
      }
      Inputs in(o.shape, o.mac.band, 9);
      std::vector<float> q, k, v;
      for (int id : ids) in.next(id, q, k, v);
      const Session::Result& r = s.step(ids, q, k, v, false);
      std::vector<GroupSpan> spans;
      for (std::size_t i = 0; i < r.groups.size(); ++i) {
        const GroupInfo& g = r.groups[i];
        spans.push_back(GroupSpan{static_cast<int>(i) / o.shape.kv_heads,
                                  static_cast<int>(i) % o.shape.kv_heads,
                                  std::min(g.begin, g.cache_end), g.cache_end, g.kv_len});
      }
      const HostPlan want = make_plan(spans, attend_limits(s.plan_budget(), o.engine.min_chunk));
      const PlanChoice got = s.last_plan();
      EXPECT_EQ(got.kind, want.choice.kind) << "rate " << rate << " batch " << batch;
      EXPECT_EQ(got.chunk, want.choice.chunk) << "rate " << rate << " batch " << batch;
      EXPECT_EQ(got.items, want.choice.items) << "rate " << rate << " batch " << batch;
      EXPECT_EQ(got.entries, want.choice.entries) << "rate " << rate << " batch " << batch;
      EXPECT_EQ(got.makespan, want.choice.makespan) << "rate " << rate << " batch " << batch;
      saw[static_cast<int>(got.kind)] = true;
    }
  EXPECT_TRUE(saw[0] && saw[1]) << "both plan kinds should occur on these steps";
}

}  // namespace
}  // namespace mactune::cuda::testing
