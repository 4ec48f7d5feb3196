// The GPU planner's per-head decisions (kernels/cuda/detail/decide.h, host+device) against the
// fp64 reference, on the host: ring state from a running ref::Session, the match kernel's
// reduction emulated with its fp32 summation order, then decide_head. Covers eligibility,
// every pick rule, ring validity, forced hits per head and per group (the unit numbering the
// CPU engines use), and group_hits' demotion (demote_partial_group, as the plan kernel runs it).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gpu_harness.h"
#include "kernels/cuda/detail/decide.h"
#include "kernels/cuda/launch.h"

namespace mactune::cuda {
namespace {

// fp32 squared distance of two rows as the match kernel sums it: per 16-byte chunk (8 dims)
// a fused multiply-add chain, per half row an xor butterfly over the chunks, then
// first half + second half.
float kernel_d2(const std::vector<float>& a, const std::vector<float>& b) {
  const int D = static_cast<int>(a.size()), chunks = D / 8, half = chunks / 2;
  std::vector<float> part(static_cast<std::size_t>(chunks));
  for (int c = 0; c < chunks; ++c) {
    float acc = 0.0f;
    for (int i = 0; i < 8; ++i) {
      const float d =
          a[static_cast<std::size_t>(8 * c + i)] - b[static_cast<std::size_t>(8 * c + i)];
      acc = std::fma(d, d, acc);
    }
    part[static_cast<std::size_t>(c)] = acc;
  }
  auto butterfly = [&](int first) {
    std::vector<float> v(part.begin() + first, part.begin() + first + half);
    for (int o = half / 2; o >= 1; o /= 2) {
      std::vector<float> n(v.size());
      for (int i = 0; i < half; ++i)
        n[static_cast<std::size_t>(i)] =
            v[static_cast<std::size_t>(i)] + v[static_cast<std::size_t>(i ^ o)];
      v = n;
    }
    return v[0];
  };
  return butterfly(0) + butterfly(half);
}

std::vector<float> normalized(std::vector<float> x) {
  float n2 = 0.0f;
  for (float e : x) n2 = std::fma(e, e, n2);
  const float s = n2 > 0.0f ? std::sqrt(static_cast<float>(x.size()) / n2) : 1.0f;
  for (float& e : x) e *= s;
  return x;
}

struct DecideSetup {
  PickRule pick;
  bool forced;
  Coherence coherence;
  double skip_ratio = -1;   // >= 0: the skip-ratio quota (rows of different lengths)
  bool group_hits = false;  // then detail::demote_partial_group over each group
};

void PrintTo(const DecideSetup& s, std::ostream* os) {
  *os << name_of(s.pick) << (s.forced ? " forced " : " ") << name_of(s.coherence)
      << (s.group_hits ? " group_hits" : "");
}

class Decide : public ::testing::TestWithParam<DecideSetup> {};

TEST_P(Decide, EqualsReferenceDecisions) {
  const DecideSetup& su = GetParam();
  Problem shape;
  shape.batch = 3;
  shape.q_heads = 8;
  shape.kv_heads = 2;
  shape.head_dim = 64;
  shape.kv_dtype = DType::bf16;
  MacParams mac;
  mac.ring_capacity = 32;
  mac.band = 6;
  mac.min_context = 10;
  mac.pick = su.pick;
  mac.group_hits = su.group_hits;
  ForcedHits forced;
  forced.enabled = su.forced;
  forced.hit_rate = 0.5;
  forced.coherence = su.coherence;
  forced.lag = {LagKind::uniform, 1, 40};  // beyond the ring at times: invalid entries
  if (su.skip_ratio >= 0) {
    forced.quota = ForcedQuota::skip_ratio;
    forced.skip_ratio = su.skip_ratio;
  }
  ref::Session ref(shape, mac);
  ref.set_forced(forced);
  for (int r = 0; r < 3; ++r) ref.add_request();
  testing::Inputs in(shape, mac.band, 99);
  const int Hq = shape.q_heads, D = shape.head_dim, K = mac.ring_capacity;
  long long hits = 0, forced_or_real = 0, demoted = 0;
  for (int t = 0; t < 60; ++t) {
    std::vector<int> ids;
    std::vector<float> q, k, v;
    for (int r = 0; r < 3; ++r)
      if (t % (r + 2) != 1 || r == 0) {
        ids.push_back(r);
        in.next(r, q, k, v);
      }
    const int n = static_cast<int>(ids.size());
    // The device-side inputs of the planner, from the reference's state before the step.
    std::vector<StepRow> rows;
    std::vector<std::int32_t> pos(static_cast<std::size_t>(3 * K), -1);
    std::vector<float> lse(static_cast<std::size_t>(3 * Hq * K),
                           -std::numeric_limits<float>::infinity());
    std::vector<MatchPartial> best(static_cast<std::size_t>(n * Hq));
    const float threshold = static_cast<float>(match_threshold(D, mac.tau));
    for (int b = 0; b < n; ++b) {
      const int id = ids[static_cast<std::size_t>(b)], m = ref.length(id);
      rows.push_back({id, m});
      for (int s = 0; s < K; ++s)
        for (int h = 0; h < Hq; ++h) {
          const ref::RingEntry& e = ref.ring_entry(id, h, s);
          pos[static_cast<std::size_t>(id * K + s)] = e.pos;
          lse[static_cast<std::size_t>((id * Hq + h) * K + s)] = static_cast<float>(e.summary.lse);
        }
      for (int h = 0; h < Hq; ++h) {
        std::vector<float> qm(static_cast<std::size_t>(D));
        for (int i = 0; i < D; ++i)
          qm[static_cast<std::size_t>(i)] = static_cast<float>(
              round_to(shape.kv_dtype, q[static_cast<std::size_t>((b * Hq + h) * D + i)]));
        if (su.pick == PickRule::normalized) qm = normalized(qm);
        MatchPartial mp{std::numeric_limits<float>::infinity(), -1, -1,
                        std::numeric_limits<float>::infinity()};
        for (int p = std::max(0, m - K); p < m; ++p) {
          const ref::RingEntry& e = ref.ring_entry(id, h, p);
          if (e.pos != p || e.summary.empty()) continue;
          std::vector<float> qp(e.q.begin(), e.q.end());
          if (su.pick == PickRule::normalized) qp = normalized(qp);
          const float d2 = kernel_d2(qm, qp);
          if (mp.pos < 0 || d2 < mp.d2) mp = {d2, p, mp.newest, mp.bound};  // older first
          if (d2 < threshold) mp.newest = p;
        }
        best[static_cast<std::size_t>(b * Hq + h)] = mp;
      }
    }
    StepHeader header{static_cast<std::uint64_t>(t)};
    PlanParams p;
    p.header = &header;
    p.rows = rows.data();
    p.match_best = best.data();
    p.ring.pos = pos.data();
    p.ring.lse = lse.data();
    p.ring.capacity = K;
    p.threshold = threshold;
    p.pick = mac.pick;
    p.min_context = mac.min_context;
    p.forced = forced;
    p.n = n;
    p.q_heads = Hq;
    p.kv_heads = shape.kv_heads;
    p.group = shape.group_size();
    p.band = mac.band;
    const ref::Session::Result want = ref.step(ids, q, k, v);
    std::vector<HeadDecision> got_all(static_cast<std::size_t>(n * Hq));
    for (int hr = 0; hr < n * Hq; ++hr)
      got_all[static_cast<std::size_t>(hr)] = detail::decide_head(p, hr / Hq, hr % Hq);
    if (su.group_hits)  // as the plan kernel: each group's decisions, after all were made
      for (int gi = 0; gi < n * shape.kv_heads; ++gi) {
        HeadDecision* d = &got_all[static_cast<std::size_t>(gi * p.group)];
        int hit = 0;
        for (int j = 0; j < p.group; ++j) hit += d[j].hit;
        detail::demote_partial_group(d, p.group);
        for (int j = 0; j < p.group; ++j) hit -= d[j].hit;
        demoted += hit > 0;
      }
    for (int hr = 0; hr < n * Hq; ++hr) {
      const HeadDecision& got = got_all[static_cast<std::size_t>(hr)];
      const HeadDecision& w = want.decisions[static_cast<std::size_t>(hr)];
      ASSERT_TRUE(testing::same_decision(got, w))
          << "step " << t << " head " << hr << ": got hit " << got.hit << " p " << got.p
          << " start " << got.start << ", reference hit " << w.hit << " p " << w.p << " start "
          << w.start;
      if (std::isfinite(w.d2)) {
        EXPECT_NEAR(got.d2, w.d2, 1e-4 * std::max(1.0f, w.d2) + 1e-3);
      }
      hits += w.hit;
      forced_or_real += w.eligible;
    }
  }
  EXPECT_GT(hits, 10);
  EXPECT_GT(forced_or_real, hits);
  if (su.group_hits) {
    EXPECT_GT(demoted, 10) << "no group was partial";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Rules, Decide,
    ::testing::Values(DecideSetup{PickRule::nearest, false, Coherence::per_head},
                      DecideSetup{PickRule::newest, false, Coherence::per_head},
                      DecideSetup{PickRule::normalized, false, Coherence::per_head},
                      DecideSetup{PickRule::nearest, true, Coherence::per_head},
                      DecideSetup{PickRule::nearest, true, Coherence::per_group},
                      DecideSetup{PickRule::nearest, true, Coherence::per_group, 0.8},
                      DecideSetup{PickRule::nearest, false, Coherence::per_head, -1, true},
                      DecideSetup{PickRule::newest, true, Coherence::per_head, -1, true}),
    [](const auto& param_info) {
      const DecideSetup& s = param_info.param;
      if (s.skip_ratio >= 0) return std::string(name_of(s.pick)) + "_ForcedSkipRatio";
      if (s.group_hits)
        return std::string(name_of(s.pick)) + (s.forced ? "_Forced" : "") + "_GroupHits";
      return std::string(name_of(s.pick)) +
             (s.forced ? (s.coherence == Coherence::per_head ? "_ForcedPerHead" : "_ForcedPerGroup")
                       : "");
    });

}  // namespace
}  // namespace mactune::cuda
