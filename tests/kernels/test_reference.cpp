// The fp64 reference session against independent computations of DESIGN.md section 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "kernels/reference.h"

namespace mactune::ref {
namespace {

// Pre-RoPE inputs of one request, step by step; queries can be pinned to repeat earlier ones.
struct Stream {
  int Hq, Hkv, D;
  std::mt19937_64 rng;
  std::vector<std::vector<float>> q, k, v;  // [step][heads * D]
  std::map<int, int> repeat;                // step -> earlier step whose queries it copies

  Stream(const Problem& p, std::uint64_t seed)
      : Hq(p.q_heads), Hkv(p.kv_heads), D(p.head_dim), rng(seed) {}
  std::vector<float> randn(int n) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& e : x) e = nd(rng);
    return x;
  }
  void grow(int steps) {
    while (static_cast<int>(q.size()) < steps) {
      const int t = static_cast<int>(q.size());
      auto it = repeat.find(t);
      q.push_back(it != repeat.end() ? q.at(static_cast<std::size_t>(it->second)) : randn(Hq * D));
      k.push_back(randn(Hkv * D));
      v.push_back(randn(Hkv * D));
    }
  }
};

Session::Result step(Session& s, int req, Stream& in, int t) {
  in.grow(t + 1);
  const int r[] = {req};
  return s.step(r, in.q[t], in.k[t], in.v[t]);
}

// Independent full attention of head h at step m from the raw stream (README formulas).
Vec full_attention(const Stream& in, int m, int h, DType kv_dtype, double theta) {
  const int D = in.D, half = D / 2, g = h / (in.Hq / in.Hkv);
  auto rope = [&](const float* x, int pos) {
    Vec out(static_cast<std::size_t>(D));
    for (int i = 0; i < D; ++i) {
      const double ang = pos * std::pow(theta, -2.0 * (i % half) / D);
      const double rot = i < half ? -x[i + half] : x[i - half];
      out[i] = x[i] * std::cos(ang) + rot * std::sin(ang);
    }
    return out;
  };
  const Vec qr = rope(&in.q[m][std::size_t(h) * D], m);
  std::vector<double> s;
  for (int j = 0; j <= m; ++j) {
    const Vec kr = rope(&in.k[j][std::size_t(g) * D], j);
    double dot = 0;
    for (int i = 0; i < D; ++i) dot += qr[i] * round_to(kv_dtype, kr[i]);
    s.push_back(dot / std::sqrt(double(D)));
  }
  double mx = -INFINITY, z = 0;
  for (double x : s) mx = std::max(mx, x);
  for (double x : s) z += std::exp(x - mx);
  Vec o(static_cast<std::size_t>(D), 0.0);
  for (int j = 0; j <= m; ++j)
    for (int i = 0; i < D; ++i)
      o[i] += std::exp(s[j] - mx) / z * round_to(kv_dtype, in.v[j][std::size_t(g) * D + i]);
  return o;
}

double rel_err(const double* a, const Vec& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

Problem shape(int hq, int hkv, int d, DType kv = DType::f32) {
  Problem p;
  p.batch = 4;
  p.q_heads = hq;
  p.kv_heads = hkv;
  p.head_dim = d;
  p.kv_dtype = kv;
  return p;
}

MacParams params(int K, int r, double tau, int min_context = 0) {
  MacParams m;
  m.ring_capacity = K;
  m.band = r;
  m.tau = tau;
  m.min_context = min_context;
  return m;
}

TEST(Reference, MissesEqualFullAttentionAcrossRequestsAndDtypes) {
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const Problem p = shape(8, 2, 16, dt);
    Session s(p, params(16, 4, 1.0), 500000.0);
    Stream a(p, 11), b(p, 12);
    const int ra = s.add_request(), rb = s.add_request();
    for (int t = 0; t < 40; ++t) {
      a.grow(t + 1);
      b.grow(t / 2 + 1);
      // Request b advances every other step: a batch of requests at different lengths.
      std::vector<int> reqs{ra};
      std::vector<float> q = a.q[t], k = a.k[t], v = a.v[t];
      if (t % 2 == 0) {
        reqs.push_back(rb);
        q.insert(q.end(), b.q[t / 2].begin(), b.q[t / 2].end());
        k.insert(k.end(), b.k[t / 2].begin(), b.k[t / 2].end());
        v.insert(v.end(), b.v[t / 2].begin(), b.v[t / 2].end());
      }
      const auto res = s.step(reqs, q, k, v);
      for (int h = 0; h < 8; ++h) {
        EXPECT_LT(rel_err(&res.out[std::size_t(h) * 16], full_attention(a, t, h, dt, 500000.0)),
                  1e-12);
        EXPECT_FALSE(res.decisions[std::size_t(h)].hit);
        if (t % 2 == 0) {
          EXPECT_LT(
              rel_err(&res.out[std::size_t(8 + h) * 16], full_attention(b, t / 2, h, dt, 500000.0)),
              1e-12);
        }
      }
      EXPECT_EQ(res.stats.skip_ratio(), 0.0);
    }
  }
}

TEST(Reference, HitsReuseTheRingAndEntriesChainByForwardMerge) {
  const Problem p = shape(4, 2, 16);
  const MacParams mp = params(12, 3, 0.5);
  Session s(p, mp);
  Stream in(p, 21);
  for (int t = 10; t < 80; ++t) in.repeat[t] = t - 5 - (t % 3);  // lags 5..7: always a hit
  const int req = s.add_request();
  int hits = 0;
  for (int m = 0; m < 80; ++m) {
    in.grow(m + 1);
    std::map<std::pair<int, int>, State> snap;  // (head, p) -> entry before the step
    for (int h = 0; h < 4; ++h)
      for (int p0 = std::max(0, m - 12); p0 < m; ++p0)
        if (s.ring_entry(req, h, p0).pos == p0) snap[{h, p0}] = s.ring_entry(req, h, p0).summary;
    const auto res = step(s, req, in, m);
    const RopeAngles ang = rope_angles(16, m, kDefaultRopeTheta);
    for (int h = 0; h < 4; ++h) {
      const HeadDecision& d = res.decisions[std::size_t(h)];
      Vec q(16);
      apply_rope(&in.q[m][std::size_t(h) * 16], q.data(), 16, ang);
      const KvHead& kv = s.kv(req, h / 2);
      const int ce = cache_end(m, 3);
      State expect_entry(16), expect_out(16);
      if (d.hit) {
        ++hits;
        EXPECT_EQ(d.start, cache_end(d.p, 3));
        const State& prefix = snap.at({h, d.p});
        expect_out = merge(prefix, attend(q.data(), kv, 16, d.start, m + 1, p.scale()));
        expect_entry = merge(prefix, attend(q.data(), kv, 16, d.start, ce, p.scale()));
      } else {
        expect_out = attend(q.data(), kv, 16, 0, m + 1, p.scale());
        expect_entry = attend(q.data(), kv, 16, 0, ce, p.scale());
      }
      EXPECT_LT(rel_err(&res.out[std::size_t(h) * 16], expect_out.o), 1e-12);
      const RingEntry& e = s.ring_entry(req, h, m);
      EXPECT_EQ(e.pos, m);
      if (ce == 0) {
        EXPECT_TRUE(e.summary.empty());
      } else {
        EXPECT_NEAR(e.summary.lse, expect_entry.lse, 1e-6 * std::fabs(expect_entry.lse) + 1e-6);
        EXPECT_LT(rel_err(e.summary.o.data(), expect_entry.o), 1e-6);
      }
    }
  }
  EXPECT_GT(hits, 4 * 60);
}

TEST(Reference, ForwardMergeAndSubtractionAgreeWhereWellConditioned) {
  const Problem p = shape(4, 1, 16);
  MacParams fw = params(32, 2, 0.5), sub = fw;
  sub.rectify = Rectify::subtract;
  Session a(p, fw), b(p, sub);
  Stream in(p, 31);
  for (int t = 20; t < 120; ++t) in.repeat[t] = t - 9;
  const int ra = a.add_request(), rb = b.add_request();
  int hits = 0;
  for (int m = 0; m < 120; ++m) {
    const auto x = step(a, ra, in, m), y = step(b, rb, in, m);
    for (int h = 0; h < 4; ++h) {
      EXPECT_EQ(x.decisions[h].hit, y.decisions[h].hit);
      hits += x.decisions[h].hit;
      EXPECT_LT(rel_err(&x.out[std::size_t(h) * 16],
                        Vec(y.out.begin() + h * 16, y.out.begin() + h * 16 + 16)),
                1e-6);
    }
    EXPECT_EQ(y.stats.guard_fires, 0);
  }
  EXPECT_GT(hits, 300);
}

TEST(Reference, RingWrapsAroundAndOnlyTheLastKPositionsAreCandidates) {
  const Problem p = shape(2, 1, 16);
  Session s(p, params(8, 2, 0.9));
  Stream in(p, 41);
  in.repeat[20] = 11;  // lag 9 > K: outside the window
  in.repeat[30] = 22;  // lag 8 = K: slot 30 mod 8 still holds position 22 during the match
  const int req = s.add_request();
  for (int m = 0; m < 31; ++m) {
    const auto res = step(s, req, in, m);
    for (int h = 0; h < 2; ++h) {
      if (m == 30) {
        EXPECT_TRUE(res.decisions[h].hit);
        EXPECT_EQ(res.decisions[h].p, 22);
        EXPECT_EQ(res.decisions[h].d2, 0.0f);
      } else {
        EXPECT_FALSE(res.decisions[h].hit) << m;
      }
    }
  }
  EXPECT_EQ(s.ring_entry(req, 0, 30).pos, 30);  // the slot now holds the new position
}

TEST(Reference, PickRulesAndTheTieBreakToTheOlderPosition) {
  const Problem p = shape(1, 1, 16);
  for (PickRule rule : {PickRule::nearest, PickRule::newest, PickRule::normalized}) {
    MacParams mp = params(64, 2, 0.9);
    mp.pick = rule;
    Session s(p, mp);
    Stream in(p, 51);
    in.grow(45);
    in.q[35] = in.q[30];
    in.q[40] = in.q[30];
    in.q[44] = in.q[30];
    for (float& x : in.q[44]) x *= 3.0f;  // only the normalized rule sees it as q_30
    const int req = s.add_request();
    for (int m = 0; m < 45; ++m) {
      const auto res = step(s, req, in, m);
      const HeadDecision& d = res.decisions[0];
      if (m == 35) {
        EXPECT_EQ(d.p, 30);
      }
      if (m == 40) {
        EXPECT_EQ(d.p, rule == PickRule::newest ? 35 : 30) << name_of(rule);
      }
      if (m == 44) {
        EXPECT_EQ(d.hit, rule == PickRule::normalized) << name_of(rule);
        if (d.hit) {
          EXPECT_EQ(d.p, 30);
        }
      }
    }
  }
}

TEST(Reference, EmptySummariesNeverHitAndTauOneNeverHits) {
  const Problem p = shape(1, 1, 16);
  for (double tau : {0.9, 1.0, 1.5}) {
    Session s(p, params(64, 8, tau));
    Stream in(p, 61);
    in.repeat[9] = 3;    // p = 3 < r: its summary covers [0, 0), empty
    in.repeat[20] = 12;  // p = 12 >= r: a hit unless tau >= 1
    const int req = s.add_request();
    for (int m = 0; m < 21; ++m) {
      const auto res = step(s, req, in, m);
      if (m == 9) {
        EXPECT_FALSE(res.decisions[0].hit);
      }
      if (m == 20) {
        EXPECT_EQ(res.decisions[0].hit, tau < 1.0) << tau;
      }
      if (tau >= 1.0) {
        EXPECT_FALSE(res.decisions[0].hit);
      }
    }
  }
}

TEST(Reference, BelowMinContextEveryStepIsFullAttentionButTheRingIsWritten) {
  const Problem p = shape(2, 1, 16);
  Session s(p, params(64, 2, 0.0, 30));  // tau = 0: everything under threshold 2D would hit
  Stream in(p, 71);
  const int req = s.add_request();
  for (int m = 0; m < 40; ++m) {
    const auto res = step(s, req, in, m);
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(res.decisions[h].eligible, m >= 30);
      if (m < 30) {
        EXPECT_FALSE(res.decisions[h].hit);
        EXPECT_LT(rel_err(&res.out[std::size_t(h) * 16],
                          full_attention(in, m, h, DType::f32, kDefaultRopeTheta)),
                  1e-12);
      } else {
        EXPECT_TRUE(res.decisions[h].hit) << m;
      }
      EXPECT_EQ(s.ring_entry(req, h, m).pos, m);
    }
  }
}

TEST(Reference, GroupModesAndSkipRatioFollowThePerHeadDecisions) {
  const Problem p = shape(4, 2, 16);  // G = 2
  Session s(p, params(64, 2, 0.9));
  Stream in(p, 81);
  in.grow(41);
  // Step 40: heads 0, 1 (group 0) and head 2 repeat step 30; head 3 is fresh.
  for (int h = 0; h < 3; ++h)
    std::copy_n(&in.q[30][std::size_t(h) * 16], 16, &in.q[40][std::size_t(h) * 16]);
  const int req = s.add_request();
  Session::Result res;
  for (int m = 0; m < 41; ++m) res = step(s, req, in, m);
  EXPECT_TRUE(res.decisions[0].hit && res.decisions[1].hit && res.decisions[2].hit);
  EXPECT_FALSE(res.decisions[3].hit);
  ASSERT_EQ(res.groups.size(), 2u);
  EXPECT_EQ(res.groups[0].mode, GroupMode::all_hit);
  EXPECT_EQ(res.groups[1].mode, GroupMode::mixed);
  EXPECT_EQ(res.groups[0].begin, cache_end(30, 2));
  EXPECT_EQ(res.groups[1].begin, 0);
  EXPECT_EQ(res.stats.kv_tokens_read, (41 - cache_end(30, 2)) + 41);
  EXPECT_DOUBLE_EQ(res.stats.skip_ratio(), 1.0 - double((41 - 29) + 41) / 82.0);
  EXPECT_DOUBLE_EQ(res.stats.head_skip_ratio(), 1.0 - double(3 * 12 + 41) / (4.0 * 41));
  EXPECT_EQ(res.stats.groups_all_hit, 1);
  EXPECT_EQ(res.stats.groups_mixed, 1);
  EXPECT_EQ(res.stats.hit_heads, 3);
}

TEST(Reference, ForcedHitsMeetTheExactQuota) {
  const Problem p = shape(8, 2, 16);
  for (Coherence c : {Coherence::per_head, Coherence::per_group}) {
    Session s(p, params(32, 4, 1.0));  // tau = 1: the real scan never hits
    ForcedHits f;
    f.enabled = true;
    f.hit_rate = 0.5;
    f.coherence = c;
    f.lag = {LagKind::uniform, 1, 20};
    s.set_forced(f);
    Stream a(p, 91), b(p, 92);
    const int ra = s.add_request(), rb = s.add_request();
    for (int m = 0; m < 60; ++m) {
      a.grow(m + 1);
      b.grow(m + 1);
      std::vector<float> q = a.q[m], k = a.k[m], v = a.v[m];
      q.insert(q.end(), b.q[m].begin(), b.q[m].end());
      k.insert(k.end(), b.k[m].begin(), b.k[m].end());
      v.insert(v.end(), b.v[m].begin(), b.v[m].end());
      const auto res = s.step(std::vector<int>{ra, rb}, q, k, v);
      if (m >= 30) {  // lags up to 20 are valid once m - r >= 20
        EXPECT_EQ(res.stats.hit_heads, 8);
        if (c == Coherence::per_group) {
          EXPECT_EQ(res.stats.groups_all_hit, 2);
          EXPECT_EQ(res.stats.groups_mixed, 0);
        }
        for (const HeadDecision& d : res.decisions)
          if (d.hit) {
            EXPECT_TRUE(m - d.p >= 1 && m - d.p <= 20);
          }
      }
    }
  }
}

// The skip-ratio quota: requests of different lengths in one step (they join at different
// steps), several shapes and ratios. Wherever every request can reach its share (the ring
// holds every stepped position, so validity never gets in the way), the step skips exactly
// round(s x sum of kv_len) tokens, and every group hits or misses as a whole.
TEST(Reference, ForcedSkipRatioIsExactToTheToken) {
  struct Case {
    int hq, hkv, K, r;
  };
  int exact_steps = 0;
  for (const Case c : {Case{8, 2, 32, 4}, Case{4, 4, 24, 2}, Case{6, 1, 40, 8}})
    for (const double skip : {0.3, 0.8, 0.95}) {
      SCOPED_TRACE(::testing::Message() << "q " << c.hq << " kv " << c.hkv << " K " << c.K << " r "
                                        << c.r << " skip " << skip);
      const Problem p = shape(c.hq, c.hkv, 8);
      Session s(p, params(c.K, c.r, 1.0));  // tau = 1: only the forced decisions hit
      ForcedHits f;
      f.enabled = true;
      f.quota = ForcedQuota::skip_ratio;
      f.skip_ratio = skip;
      s.set_forced(f);
      std::vector<Stream> in;
      std::vector<int> ids;
      for (int t = 0; t < 70; ++t) {
        for (const int join : {0, 9, 23})
          if (t == join) {
            in.emplace_back(p, 500 + join);
            ids.push_back(s.add_request());
          }
        std::vector<float> q, k, v;
        long long before = 0;
        bool reachable = true;
        for (std::size_t b = 0; b < ids.size(); ++b) {
          const int m = s.length(ids[b]);
          reachable = reachable && forced_skip_request(f, m, before, c.hkv, c.K, c.r).reachable;
          before += m + 1;
          in[b].grow(m + 1);
          q.insert(q.end(), in[b].q[m].begin(), in[b].q[m].end());
          k.insert(k.end(), in[b].k[m].begin(), in[b].k[m].end());
          v.insert(v.end(), in[b].v[m].begin(), in[b].v[m].end());
        }
        const auto res = s.step(ids, q, k, v);
        EXPECT_EQ(res.stats.groups_mixed, 0) << "step " << t;
        for (std::size_t i = 0; i < res.decisions.size(); ++i) {
          const HeadDecision& d = res.decisions[i];
          if (!d.hit) continue;
          const int m = s.length(ids[i / std::size_t(c.hq)]) - 1;
          EXPECT_GE(m - d.p, 1);
          EXPECT_LE(m - d.p, forced_max_lag(m, c.K, c.r));
        }
        if (!reachable) continue;
        ++exact_steps;
        EXPECT_EQ(res.stats.kv_tokens_total - res.stats.kv_tokens_read,
                  forced_skip_round(skip, res.stats.kv_tokens_total))
            << "step " << t;
      }
    }
  EXPECT_GT(exact_steps, 200);  // of 630 (short requests cannot reach some ratios)
}

TEST(Reference, AcceptanceGateSendsHeavyPrefixesBackToFullAttention) {
  const Problem p = shape(2, 1, 16);
  MacParams mp = params(64, 2, 0.5);
  mp.accept_eps = 0.05;  // the prefix of a late hit carries most of the mass: rejected
  Session s(p, mp);
  Stream in(p, 101);
  for (int t = 30; t < 60; ++t) in.repeat[t] = t - 3;
  const int req = s.add_request();
  int rejected = 0;
  for (int m = 0; m < 60; ++m) {
    const auto res = step(s, req, in, m);
    for (int h = 0; h < 2; ++h) {
      const HeadDecision& d = res.decisions[h];
      if (d.gate_rejected) {
        ++rejected;
        EXPECT_FALSE(d.hit);
        EXPECT_LT(rel_err(&res.out[std::size_t(h) * 16],
                          full_attention(in, m, h, DType::f32, kDefaultRopeTheta)),
                  1e-12);
      }
    }
    EXPECT_EQ(res.stats.gate_rejections,
              int(res.decisions[0].gate_rejected) + int(res.decisions[1].gate_rejected));
  }
  EXPECT_GT(rejected, 20);
}

// group_hits: a group where one head misses (or is rejected by the gate) misses in every head;
// the demoted heads give exactly full attention; groups where every head hits keep their hits.
TEST(Reference, GroupHitsDemotePartialGroupsToFullAttention) {
  const Problem p = shape(4, 2, 16);
  for (double eps : {1.0, 0.6}) {  // 0.6: rejects about a third of the hits
    SCOPED_TRACE("accept_eps " + std::to_string(eps));
    MacParams mp = params(64, 2, 0.5);
    mp.accept_eps = eps;
    Session plain(p, mp);
    mp.group_hits = true;
    Session grouped(p, mp);
    Stream in(p, 7);
    for (int t = 30; t < 70; ++t) in.repeat[t] = t - 3;
    in.grow(70);
    for (int t = 30; t < 70; t += 2) {  // head 1 (group 0) fresh on even steps: partial groups
      const std::vector<float> x = in.randn(16);
      std::copy(x.begin(), x.end(), in.q[std::size_t(t)].begin() + 16);
    }
    const int a = plain.add_request(), b = grouped.add_request();
    int mixed = 0, demoted = 0, hits = 0, rejected = 0;
    for (int m = 0; m < 70; ++m) {
      const auto ra = step(plain, a, in, m), rb = step(grouped, b, in, m);
      mixed += ra.stats.groups_mixed;
      rejected += rb.stats.gate_rejections;
      EXPECT_EQ(rb.stats.groups_mixed, 0) << "step " << m;
      for (int g = 0; g < 2; ++g) {
        const HeadDecision &h0 = rb.decisions[std::size_t(2 * g)],
                           &h1 = rb.decisions[std::size_t(2 * g + 1)];
        EXPECT_EQ(h0.hit, h1.hit) << "step " << m << " group " << g;
      }
      for (int h = 0; h < 4; ++h) {
        const HeadDecision& d = rb.decisions[std::size_t(h)];
        hits += d.hit;
        if (d.hit || !ra.decisions[std::size_t(h)].hit || d.gate_rejected) continue;
        ++demoted;  // a hit without group_hits, a plain miss with it
        EXPECT_LT(rel_err(&rb.out[std::size_t(h) * 16],
                          full_attention(in, m, h, DType::f32, kDefaultRopeTheta)),
                  1e-12)
            << "step " << m << " head " << h;
      }
    }
    EXPECT_GT(mixed, 10);
    EXPECT_GT(demoted, 10);
    EXPECT_GT(hits, 20);
    if (eps < 1.0) EXPECT_GT(rejected, 10);
  }
}

TEST(Reference, AuxiliaryMemoryMatchesThePapersTable7) {
  const double want[] = {0.012, 0.024, 0.047, 0.094};
  const int ks[] = {256, 512, 1024, 2048};
  for (int i = 0; i < 4; ++i) {
    const double r = aux_memory_ratio(4, 128, ks[i], 131072, DType::bf16, DType::f32);
    EXPECT_NEAR(r, want[i], 0.0005) << ks[i];
  }
  // bf16 summaries: G (K / L) (1 + 1/D), 3.15% at K = 1024.
  EXPECT_NEAR(aux_memory_ratio(4, 128, 1024, 131072, DType::bf16, DType::bf16), 0.0315, 0.0001);
}

TEST(Reference, RefusesBadShapesNamingTheValue) {
  try {
    Session s(shape(6, 4, 16), params(8, 2, 0.5));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("kv_heads = 4 does not divide q_heads = 6"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Session(shape(4, 2, 15), params(8, 2, 0.5)), InputError);
  EXPECT_THROW(Session(shape(4, 2, 16), params(0, 2, 0.5)), InputError);
}

}  // namespace
}  // namespace mactune::ref
