// Runs a cuda::Session under the simt interpreter after a synthetic prefill, step by step against
// SyntheticOracle: every decision exact, outputs and new ring entries within tolerance, the step
// accounting equal. Production shapes: the kernels, launchers, planner and session code are the
// ones a GPU runs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gpu_harness.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/registry.h"
#include "kernels/cuda/session.h"
#include "kernels/cuda/simt/runtime.h"
#include "synthetic_oracle.h"

namespace mactune::simt::testing {

// fp32-class: the kernels split q and P into two 16-bit halves and accumulate in fp32, and the
// inputs are exactly representable (synthetic KV is stored bf16), so only arithmetic is left.
inline constexpr double kSyntheticTol = 2e-5;

struct SynthCase {
  std::string name;
  int batch = 4, group = 4, kv_heads = 8, page_size = 16;
  std::vector<int> contexts;  // per request; cycled over the batch
  int ring = 512, band = 64, min_context = 256;
  PickRule pick = PickRule::nearest;
  double tau = 0.45;
  DType summary = DType::f32;
  bool mac_enabled = true;
  bool group_hits = false;
  ForcedHits forced;
  double natural_hits = 0.0;  // share of heads whose query repeats a ring entry's q~ exactly
  int steps = 1;
  cuda::EngineConfig engine;
  // At step switch_at (>= 0), set_engine(switch_engine) before the step runs.
  int switch_at = -1;
  cuda::EngineConfig switch_engine;
};

struct SynthOutcome {
  double max_rel = 0;  // worst step's ||out - oracle|| / ||oracle||
  long long hits = 0, eligible = 0, mixed_groups = 0, heads = 0;
  long long demoted_groups = 0;  // group_hits: groups the oracle demoted (all steps)
  PlanChoice plan;
  int grid = 0;
  std::vector<LaunchStats> launches;  // of the last step
  StepStats stats;                    // of the last step (the session's)
  int first_alloc = 0;                // serial of the session's first device allocation
};

inline cuda::SessionOptions synth_options(const SynthCase& c) {
  cuda::SessionOptions o;
  o.shape.batch = c.batch;
  o.shape.kv_heads = c.kv_heads;
  o.shape.q_heads = c.kv_heads * c.group;
  o.shape.head_dim = 128;
  o.shape.kv_dtype = DType::bf16;
  o.shape.page_size = c.page_size;
  o.mac.ring_capacity = c.ring;
  o.mac.band = c.band;
  o.mac.min_context = c.min_context;
  o.mac.pick = c.pick;
  o.mac.tau = c.tau;
  o.mac.summary_dtype = c.summary;
  o.mac.group_hits = c.group_hits;
  o.mac_enabled = c.mac_enabled;
  o.forced = c.forced;
  o.engine = c.engine;
  o.engine.poison = true;
  int longest = 0;
  for (int x : c.contexts) longest = std::max(longest, x);
  o.max_context = longest + c.steps + 1;
  return o;
}

// The GPU tests' harness case at simt's sizes: 3 requests of 2 KV heads, rings of 32, band 6,
// 46 steps (every ring slot written by a step both sides ran, then 14 more).
inline cuda::testing::Case harness_case(const std::string& name, int group, int page,
                                        PickRule pick) {
  cuda::testing::Case c;
  c.name = name;
  c.shape.batch = 3;
  c.shape.kv_heads = 2;
  c.shape.q_heads = 2 * group;
  c.shape.head_dim = 128;
  c.shape.kv_dtype = DType::bf16;
  c.shape.page_size = page;
  c.mac.ring_capacity = 32;
  c.mac.band = 6;
  c.mac.tau = 0.45;
  c.mac.min_context = 10;
  c.mac.pick = pick;
  c.requests = 3;
  c.steps = 32 + 14;
  return c;
}

inline SynthOutcome run_synthetic(const SynthCase& c) {
  SynthOutcome res;
  const cuda::SessionOptions o = synth_options(c);
  res.first_alloc = allocation_count();
  cuda::Session s(o);
  SyntheticOracle oracle(o);
  const int Hq = o.shape.q_heads, Hkv = o.shape.kv_heads, D = o.shape.head_dim;
  std::vector<int> ids;
  options().checks = false;  // the synthetic prefill is set-up, not under test
  for (int b = 0; b < c.batch; ++b) {
    ids.push_back(s.add_request());
    const int len = c.contexts[static_cast<std::size_t>(b) % c.contexts.size()];
    s.prefill_synthetic(ids.back(), len, 1000 + b);
    oracle.prefill(len, 1000 + b);
  }
  options().checks = true;
  std::mt19937_64 rng(std::hash<std::string>{}(c.name));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int t = 0; t < c.steps; ++t) {
    if (t == c.switch_at) {
      cuda::EngineConfig e = c.switch_engine;
      e.poison = true;
      s.set_engine(e);
    }
    std::vector<float> q, k, v;
    for (int b = 0; b < c.batch; ++b) {
      const SyntheticOracle::Request& r = oracle.request(ids[static_cast<std::size_t>(b)]);
      const int m = r.len;
      for (int h = 0; h < Hq; ++h) {
        const bool repeat = c.mac_enabled && u(rng) < c.natural_hits;
        int p = -1;
        if (repeat) {  // a valid entry among the newest 40 candidates
          for (int tries = 0; tries < 8 && p < 0; ++tries) {
            const int cand =
                m - 1 - static_cast<int>(rng() % static_cast<unsigned>(std::min(40, c.ring)));
            const int sl = ring_slot(cand, c.ring);
            if (cand >= 0 && r.ring_pos[sl] == cand && std::isfinite(r.ring_lse[h][sl])) p = cand;
          }
        }
        for (int d = 0; d < D; ++d)
          q.push_back(p >= 0 ? r.ring_q[h][static_cast<std::size_t>(ring_slot(p, c.ring)) * D + d]
                             : nd(rng));
      }
      for (int i = 0; i < 2 * Hkv * D; ++i) (i < Hkv * D ? k : v).push_back(nd(rng));
    }
    clear_launches();
    std::vector<float> got(static_cast<std::size_t>(c.batch) * Hq * D);
    const cuda::Session::Result& g = s.step_into(ids, q, k, v, got);
    res.launches = launches();
    const SyntheticOracle::Step want = oracle.step(ids, q, k, v);
    res.plan = s.last_plan();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!std::isfinite(got[i])) {
        ADD_FAILURE() << c.name << " step " << t << ": output " << i << " not written (or NaN)";
        return res;
      }
      num += (got[i] - want.out[i]) * (got[i] - want.out[i]);
      den += want.out[i] * want.out[i];
    }
    const double rel = std::sqrt(num / den);
    res.max_rel = std::max(res.max_rel, rel);
    EXPECT_LE(rel, kSyntheticTol) << c.name << " step " << t;
    for (std::size_t h = 0; h < want.decisions.size(); ++h) {
      const HeadDecision& a = g.decisions[h];
      const HeadDecision& b = want.decisions[h];
      if (!(a.eligible == b.eligible && a.hit == b.hit && a.p == b.p && a.start == b.start)) {
        ADD_FAILURE() << c.name << " step " << t << " head " << h << ": simt hit " << a.hit << " p "
                      << a.p << " start " << a.start << " d2 " << a.d2 << ", oracle hit " << b.hit
                      << " p " << b.p << " start " << b.start << " d2 " << b.d2;
        return res;
      }
      const bool probe_miss = (c.engine.match.find("_p1_") != std::string::npos ||
                               c.engine.match_mode == MatchMode::pruned ||
                               (t >= c.switch_at && c.switch_at >= 0 &&
                                c.switch_engine.match_mode == MatchMode::pruned)) &&
                              !b.hit;
      if (b.eligible && std::isfinite(b.d2) && !probe_miss && !c.forced.enabled) {
        EXPECT_NEAR(a.d2, b.d2, 1e-4 * std::max(1.0f, std::abs(b.d2)) + 1e-3)
            << c.name << " head " << h;
      }
      res.hits += b.hit;
      res.eligible += b.eligible;
      ++res.heads;
    }
    for (const GroupInfo& gi : want.groups) res.mixed_groups += gi.mode == GroupMode::mixed;
    res.demoted_groups += want.demoted_groups;
    EXPECT_EQ(g.stats.kv_tokens_read, want.stats.kv_tokens_read) << c.name;
    EXPECT_EQ(g.stats.modeled_bytes(), want.stats.modeled_bytes()) << c.name;
    res.stats = g.stats;
    if (c.mac_enabled) {  // the new ring entries (a sample of heads: ring_entry copies)
      for (int b = 0; b < c.batch; b += std::max(1, c.batch / 8))
        for (int h = 0; h < Hq; h += std::max(1, Hq / 8)) {
          const int m = oracle.request(ids[static_cast<std::size_t>(b)]).len - 1;
          const cuda::Session::RingEntry e = s.ring_entry(ids[static_cast<std::size_t>(b)], h, m);
          const ref::State& w = want.entries[static_cast<std::size_t>(b) * Hq + h];
          if (e.pos != m) {
            ADD_FAILURE() << c.name << ": ring slot of " << m << " holds " << e.pos;
            return res;
          }
          if (w.empty()) {
            EXPECT_TRUE(std::isinf(e.lse) && e.lse < 0) << c.name;
            continue;
          }
          EXPECT_NEAR(e.lse, w.lse, 1e-4 * std::max(1.0, std::abs(w.lse))) << c.name;
          double en = 0, ed = 0;
          for (int d = 0; d < D; ++d) {
            en += (e.o[d] - w.o[d]) * (e.o[d] - w.o[d]);
            ed += w.o[d] * w.o[d];
          }
          EXPECT_LE(std::sqrt(en / ed), c.summary == DType::bf16 ? 4e-3 : kSyntheticTol)
              << c.name << " ring entry b " << b << " h " << h;
        }
    }
    if (::testing::Test::HasFailure()) return res;
  }
  res.grid = cuda::attend_grid(
      cuda::attend_capacity(c.batch * c.kv_heads, s.plan_budget(), o.engine.min_chunk),
      s.plan_budget());
  return res;
}

}  // namespace mactune::simt::testing
