// The pruned match (engine match_mode = pruned, kernels/cpu/prune.h) on the shipped real decode
// traces (data/traces): step by step, the same decisions (hit, position, start), nearest-hit
// d2 and output bits as the exhaustive scan, at tau 0.45 / 0.6 / 0.75, both pick rules, f32 and
// bf16 KV; and fewer ring rows read in full.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/session.h"
#include "tests/replay/replay_fixtures.h"

namespace mactune::replay::testing {
namespace {

struct Counts {
  long head_steps = 0, hits = 0, rows_scan = 0, rows_pruned = 0;
};

Counts scan_vs_pruned(const TraceLayer& L, double theta, DType dt, PickRule pick, double tau) {
  cpu::SessionOptions o;
  o.shape.batch = 1;
  o.shape.q_heads = L.q_heads;
  o.shape.kv_heads = L.kv_heads;
  o.shape.head_dim = L.head_dim;
  o.shape.kv_dtype = dt;
  o.mac.ring_capacity = 256;
  o.mac.band = 64;
  o.mac.min_context = 256;
  o.mac.tau = tau;
  o.mac.pick = pick;
  o.rope_theta = theta;
  o.max_context = L.steps;
  o.engine.threads = 2;
  cpu::SessionOptions p = o;
  p.engine.match_mode = MatchMode::pruned;
  cpu::Session a(o), b(p);
  const int id = a.add_request();
  EXPECT_EQ(b.add_request(), id);
  const std::span<const int> ids(&id, 1);
  const std::size_t nq = std::size_t(L.q_heads) * L.head_dim;
  const std::size_t nk = std::size_t(L.kv_heads) * L.head_dim;
  std::vector<float> oa(nq), ob(nq);
  Counts c;
  for (int t = 0; t < L.steps; ++t) {
    const std::span<const float> q(L.q_row(t), nq), k(L.k_row(t), nk), v(L.v_row(t), nk);
    const cpu::Session::Result& x = a.step_into(ids, q, k, v, oa);
    const cpu::Session::Result& y = b.step_into(ids, q, k, v, ob);
    for (std::size_t h = 0; h < x.decisions.size(); ++h) {
      const HeadDecision &u = x.decisions[h], &w = y.decisions[h];
      EXPECT_EQ(u.hit, w.hit) << "step " << t << " head " << h << " d2 " << u.d2;
      EXPECT_EQ(u.p, w.p) << "step " << t << " head " << h;
      EXPECT_EQ(u.start, w.start) << "step " << t << " head " << h;
      if (u.hit && pick == PickRule::nearest) {
        EXPECT_EQ(std::memcmp(&u.d2, &w.d2, sizeof u.d2), 0) << "step " << t << " head " << h;
      }
      c.head_steps += u.eligible;
      c.hits += u.hit;
    }
    EXPECT_EQ(std::memcmp(oa.data(), ob.data(), nq * sizeof(float)), 0) << "step " << t;
    c.rows_scan += x.stats.match_rows_read;
    c.rows_pruned += y.stats.match_rows_read;
    if (::testing::Test::HasFailure()) break;
  }
  return c;
}

using Param = std::tuple<std::string, double>;  // trace, tau

class PrunedOnTraces : public ::testing::TestWithParam<Param> {};

TEST_P(PrunedOnTraces, DecidesAsTheExhaustiveScan) {
  const auto [file, tau] = GetParam();
  const DecodeTrace trace = DecodeTrace::open(trace_path(file));
  for (const int layer : trace.layers()) {
    const TraceLayer L = trace.load_layer(layer);
    for (const PickRule pick : {PickRule::nearest, PickRule::newest})
      for (const DType dt : {DType::f32, DType::bf16}) {
        if (dt == DType::bf16 && file != "code_1k.safetensors") continue;  // time: one of four
        SCOPED_TRACE("layer " + std::to_string(layer) + " " + std::string(name_of(pick)) + " " +
                     std::string(dtype_name(dt)));
        const Counts c = scan_vs_pruned(L, trace.rope_theta(), dt, pick, tau);
        EXPECT_GT(c.head_steps, 0);
        EXPECT_LT(c.rows_pruned, c.rows_scan);
        if (::testing::Test::HasFailure()) return;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Traces, PrunedOnTraces,
                         ::testing::Combine(::testing::Values("code_1k.safetensors",
                                                              "text_1k.safetensors",
                                                              "code_1k_theta5e5.safetensors",
                                                              "text_1k_theta5e5.safetensors"),
                                            ::testing::Values(0.45, 0.6, 0.75)),
                         [](const auto& i) {
                           std::string f = std::get<0>(i.param);
                           f = f.substr(0, f.find('.'));
                           return f + "_Tau" + name_number(std::get<1>(i.param));
                         });

}  // namespace
}  // namespace mactune::replay::testing
