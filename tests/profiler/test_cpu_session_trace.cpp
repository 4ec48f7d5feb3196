// The CPU engine's own trace: mactune::cpu::Session driven by the profile loop with the CPU phase
// tracer as its sink. The written Chrome trace must pass the structural validator with match,
// plan (where present), attend and merge in every step, and the steps must carry the engine's
// StepStats.
#include <gtest/gtest.h>

#include <sstream>

#include "kernels/cpu/session.h"
#include "profiler/activity.h"
#include "profiler/decode_loop.h"
#include "profiler/profile_trace.h"
#include "profiler/summary.h"
#include "profiler/tee_sink.h"
#include "profiler/trace_check.h"

namespace mactune::prof {
namespace {

struct Config {
  int batch, q_heads, kv_heads, head_dim, threads;
  bool mac;
};

void PrintTo(const Config& c, std::ostream* out) {
  *out << (c.mac ? "mac" : "full") << " batch " << c.batch << " Hq " << c.q_heads << " Hkv "
       << c.kv_heads << " D " << c.head_dim << " threads " << c.threads;
}

class CpuSessionTrace : public ::testing::TestWithParam<Config> {};

TEST_P(CpuSessionTrace, ValidatesWithEveryPhaseInEveryStep) {
  const Config c = GetParam();
  cpu::SessionOptions opt;
  opt.shape = {.batch = c.batch,
               .q_heads = c.q_heads,
               .kv_heads = c.kv_heads,
               .head_dim = c.head_dim,
               .kv_dtype = DType::f32,
               .page_size = 16};
  opt.mac.ring_capacity = 64;
  opt.mac.band = 32;
  opt.mac.min_context = 128;
  opt.mac_enabled = c.mac;
  opt.engine.threads = c.threads;
  opt.engine.chunk_tokens = 64;
  opt.max_context = 1024;
  CpuPhaseTracer tracer;
  NvtxPhaseSink nvtx;  // no tool here: must not disturb anything
  TeeSink tee{&tracer, &nvtx};
  opt.phases = tee.get();
  cpu::Session session(opt);
  tracer.set_default_instance(session.instance_name());
  tracer.ignore(Phase::step);
  std::vector<int> requests;
  for (int b = 0; b < c.batch; ++b) {
    requests.push_back(session.add_request());
    session.prefill_synthetic(requests.back(), 300 + 17 * b, 11 + b);
  }
  auto none = make_null_collector("CPU backend");
  LoopOptions loop_opt;
  loop_opt.steps = 5;
  loop_opt.warmup = 2;
  const LoopResult loop = run_decode_loop(session, requests, opt.shape, loop_opt, tracer, *none);
  ASSERT_EQ(loop.steps.size(), 5u);
  EXPECT_EQ(loop.instance, session.instance_name());

  const Timeline tl = make_profile_timeline(tracer, loop, none->take(), {});
  std::ostringstream json;
  write_chrome_trace(json, tl, {});
  TraceCheckOptions check;
  check.min_steps = 5;
  check.phases_every_step = c.mac ? std::vector<std::string>{"match", "attend", "merge"}
                                  : std::vector<std::string>{"attend"};
  check.phases_where_present = {"plan", "merge"};
  const TraceCheck r = check_chrome_trace(json.str(), check);
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_EQ(r.steps, 5);

  // Every measured step read KV: the modeled bytes of a step cover at least the band per group.
  const ProfileSummary s = summarize(tracer.threads(), loop.steps);
  EXPECT_GT(s.kv_bytes_read, 0.0);
  for (const auto& ph : s.phases) EXPECT_LE(ph.share, 1.0 + 1e-9) << ph.name;
  for (const auto& st : loop.steps) {
    EXPECT_GE(st.stats.kv_tokens_read, static_cast<long long>(c.batch) * c.kv_heads);
    EXPECT_LE(st.stats.kv_tokens_read, st.stats.kv_tokens_total);
    EXPECT_EQ(st.stats.eligible_heads, c.mac ? c.batch * c.q_heads : 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuSessionTrace,
                         ::testing::Values(Config{2, 8, 2, 64, 2, true},
                                           Config{1, 4, 4, 128, 1, true},
                                           Config{2, 8, 2, 64, 2, false}),
                         [](const auto& p) {
                           const Config& c = p.param;
                           return std::string(c.mac ? "Mac" : "Full") + "_B" +
                                  std::to_string(c.batch) + "_Hq" + std::to_string(c.q_heads) +
                                  "_Hkv" + std::to_string(c.kv_heads) + "_D" +
                                  std::to_string(c.head_dim) + "_T" + std::to_string(c.threads);
                         });

}  // namespace
}  // namespace mactune::prof
