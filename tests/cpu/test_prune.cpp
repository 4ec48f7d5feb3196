// The pruned match (kernels/cpu/prune.h, engine match_mode = pruned) against the exhaustive scan.
// 1. The bound, per kernel instance (every ISA path this CPU runs and the 16-lane test
//    instance), dtype and head_dim, on adversarial rows (near-duplicates, outlier channels,
//    magnitudes from 2^-60 to 2^60, zeros, subnormals, infinities): never above the d2 the
//    scan computes, and dist2_some gives the scan's d2 bit for bit.
// 2. Decisions, randomized: two sessions, scan and pruned, on the same streams, where queries
//    repeat earlier ones exactly (ties) or sit at distances within 1e-7..1e-3 of the threshold
//    on either side: every decision (hit, position, start), every nearest-hit d2 and every
//    output bit equal, for both pick rules and several tau.
// 3. The fp64 reference's streams (tests/cpu/harness.h) with match = pruned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_api.h"
#include "kernels/cpu/prune.h"
#include "kernels/cpu/storage.h"
#include "kernels/problem.h"
#include "tests/cpu/harness.h"
#include "tests/cpu/isa_lanes.h"

namespace mactune::cpu::test {
namespace {

struct Instance {
  const char* name;
  KernelSet (*set)(int head_dim, DType kv_dtype);
  Isa runs_on;
};
void PrintTo(const Instance& instance, std::ostream* os) {
  *os << instance.name;
}
const Instance kInstances[] = {
    {"generic", &generic::kernel_set, Isa::generic},
    {"avx2", &avx2::kernel_set, Isa::avx2},
    {"avx512", &avx512::kernel_set, Isa::avx512},
    {"lanes16", &lanes16::kernel_set, Isa::generic},
};

class PruneBound : public ::testing::TestWithParam<Instance> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam().runs_on))
      GTEST_SKIP() << isa_unsupported_reason(GetParam().runs_on);
  }
};

// Rows of every kind the bound must survive, around the query q.
std::vector<float> adversarial_row(int kind, const std::vector<float>& q, std::mt19937_64& rng) {
  const int D = static_cast<int>(q.size());
  std::normal_distribution<double> n(0.0, 1.0);
  std::uniform_int_distribution<int> e(-60, 60);
  std::vector<float> x(D);
  switch (kind % 9) {
    case 0:  // fresh
      for (float& v : x) v = static_cast<float>(n(rng));
      break;
    case 1:  // near-duplicate: d2 ~ 1e-6 .. 1e-2
      for (int i = 0; i < D; ++i) x[i] = q[i] + static_cast<float>(1e-3 * (kind % 5 + 1) * n(rng));
      break;
    case 2:  // the query itself: d2 = 0
      x = q;
      break;
    case 3:  // an outlier channel a thousand times the rest
      for (float& v : x) v = static_cast<float>(n(rng));
      x[static_cast<std::size_t>(kind) % x.size()] = 1000.0f;
      break;
    case 4:  // magnitudes from 2^-60 to 2^60
      for (float& v : x) v = static_cast<float>(std::ldexp(n(rng), e(rng)));
      break;
    case 5:  // zero
      break;
    case 6:  // subnormal and tiny
      for (float& v : x) v = static_cast<float>(1e-41 * n(rng));
      break;
    case 7:  // the query scaled: same direction, norm off by 1%
      for (int i = 0; i < D; ++i) x[i] = 1.01f * q[i];
      break;
    case 8:  // an infinity
      for (float& v : x) v = static_cast<float>(n(rng));
      x[0] = std::numeric_limits<float>::infinity();
      break;
  }
  return x;
}

// sum a_i n_i of one slot, in the plain order.
std::int32_t exact_dot(const std::int8_t* a, const std::uint8_t* codes, int D) {
  std::int32_t s = 0;
  for (int i = 0; i < D; ++i) {
    const int n = i < D / 2 ? codes[i] & 15 : codes[i - D / 2] >> 4;
    s += a[i] * n;
  }
  return s;
}

TEST_P(PruneBound, NeverAboveTheScansDistanceAndSomeDistIsBitExact) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> n(0.0, 1.0);
  std::uniform_int_distribution<int> e60(-60, 60);
  long checked = 0, pruned_far = 0, far = 0, kernel_agrees = 0, kernel_checked = 0;
  for (const int D : {64, 128, 256})
    for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
      const KernelSet ks = GetParam().set(D, dt);
      ASSERT_NE(ks.sketch_dot, nullptr);
      ASSERT_NE(ks.dist2_some, nullptr);
      for (int trial = 0; trial < 12; ++trial) {
        const int slots = 61 + trial;  // groups of 8 and a tail
        Ring ring;
        ring.allocate(1, slots, D, dt, DType::f32);
        std::vector<float> q(D);
        const double qs = trial % 3 == 0 ? 1e-3 : trial % 3 == 1 ? 1.0 : 300.0;
        for (float& v : q) v = static_cast<float>(qs * n(rng));
        if (trial == 9)  // the int8 query's step set by one channel: the rest in a few codes
          q[5] = static_cast<float>(1000.0 * qs);
        if (trial == 10)  // magnitudes from 2^-60 to 2^60: most of the query rounds to code 0
          for (float& v : q) v = static_cast<float>(std::ldexp(n(rng), e60(rng)));
        if (trial == 11) q[3] = std::numeric_limits<float>::infinity();  // a query with no bound
        std::vector<float> qr(D);  // rounded to the dtype, as the engine's q_round
        for (int i = 0; i < D; ++i) qr[i] = static_cast<float>(round_to(dt, q[i]));
        for (int s = 0; s < slots; ++s)
          ring.write_q(0, s, adversarial_row(s + trial, qr, rng).data());
        std::vector<float> d2(slots);
        ks.dist2({qr.data(), ring.q_at(0, 0), slots, false, d2.data()});
        std::vector<std::int8_t> codes(D);
        const prune::Query pq = prune::prepare(qr.data(), D, codes.data());
        std::vector<std::int32_t> dot(slots);
        // The kernel's own verdicts at a threshold among the rows' distances (its median).
        std::vector<float> sorted;
        for (const float v : d2)
          if (std::isfinite(v)) sorted.push_back(v);
        std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
        const double t_kernel = sorted.empty() ? 1.0 : sorted[sorted.size() / 2];
        std::vector<std::uint8_t> keep(slots, 2);
        ks.sketch_dot({codes.data(), ring.codes_at(0, 0), slots, dot.data(), &pq,
                       prune::root_for(pq, t_kernel), ring.sk_scale.data(), ring.sk_c2.data(),
                       ring.sk_norm.data(), ring.sk_err.data(), keep.data()});
        std::vector<int> list(slots);
        for (int s = 0; s < slots; ++s) list[s] = slots - 1 - s;  // any order
        std::vector<float> some(slots);
        ks.dist2_some({qr.data(), ring.q_at(0, 0), slots, list.data(), slots, some.data()});
        // One row a call, the query's kernel-order copy kept between calls (as the session
        // reads its survivors): the same values.
        std::vector<float> one_at_a_time(slots), q_kernel(D);
        for (int s = 0; s < slots; ++s)
          ks.dist2_some({qr.data(), ring.q_at(0, 0), slots, &list[s], 1, &one_at_a_time[s],
                         q_kernel.data(), s > 0});
        for (int s = 0; s < slots; ++s) {
          SCOPED_TRACE("D " + std::to_string(D) + " " + std::string(dtype_name(dt)) + " trial " +
                       std::to_string(trial) + " slot " + std::to_string(s));
          const float got = some[slots - 1 - s];
          EXPECT_EQ(std::memcmp(&got, &d2[s], sizeof got), 0) << got << " vs " << d2[s];
          EXPECT_EQ(std::memcmp(&one_at_a_time[slots - 1 - s], &d2[s], sizeof got), 0);
          EXPECT_EQ(dot[s], exact_dot(codes.data(), ring.codes_at(0, s), D));
          const double elo =
              prune::e_lo(pq, dot[s], ring.sk_scale[s], ring.sk_c2[s], ring.sk_norm[s]);
          const double lb = prune::lower_bound(pq, elo, ring.sk_err[s]);
          ASSERT_LE(keep[s], 1);
          if (pq.finite && !std::isnan(d2[s])) {  // ruled out by the kernel: d2 >= its threshold
            if (!keep[s]) {
              EXPECT_GE(d2[s], t_kernel);
            }
            kernel_agrees +=
                keep[s] == !prune::reaches(elo, ring.sk_err[s], prune::root_for(pq, t_kernel));
            ++kernel_checked;
          }
          if (std::isnan(d2[s])) continue;
          EXPECT_LE(lb, static_cast<double>(d2[s]));
          // The threshold test: reaching t means d2 >= t, at t just above d2 in particular.
          const double just_above = std::nextafter(d2[s], std::numeric_limits<float>::infinity());
          EXPECT_FALSE(pq.finite &&
                       prune::reaches(elo, ring.sk_err[s], prune::root_for(pq, just_above)));
          const double t = 0.5 * d2[s];
          if (pq.finite && prune::reaches(elo, ring.sk_err[s], prune::root_for(pq, t))) {
            EXPECT_GE(d2[s], t);
          }
          if ((s + trial) % 9 == 0 && std::isfinite(d2[s]) && pq.finite) {  // fresh rows
            ++far;
            pruned_far += prune::reaches(elo, ring.sk_err[s], prune::root_for(pq, t));
          }
          ++checked;
        }
      }
    }
  EXPECT_GT(checked, 5000);
  // The kernel's vectorized test is the scalar one (a fused multiply-add may move a row that
  // sits on the boundary, within the bound's slack).
  EXPECT_GE(kernel_agrees, kernel_checked - kernel_checked / 1000)
      << kernel_agrees << " of " << kernel_checked;
  // Useful as well as safe: a fresh row's bound clears half its distance nearly always.
  EXPECT_GT(pruned_far, far * 9 / 10) << pruned_far << " of " << far;
}

INSTANTIATE_TEST_SUITE_P(Instances, PruneBound, ::testing::ValuesIn(kInstances),
                         [](const auto& i) { return std::string(i.param.name); });

// ---- Decisions: scan and pruned side by side.

struct Adversary {
  int Hq, Hkv, D;
  double threshold;
  std::mt19937_64 rng;
  std::vector<std::vector<float>> q;  // [step][Hq * D]
  std::normal_distribution<double> n{0.0, 1.0};
  std::uniform_real_distribution<double> u{0.0, 1.0};

  // Step t's queries: per head fresh (1/4), an exact copy of an earlier one (1/4: ties when that
  // one was itself copied), or an earlier one plus a random offset whose squared norm is the
  // threshold times 1 + eps, eps in +-{1e-7, 1e-5, 1e-3, 0.1} (1/2).
  std::vector<float> next() {
    const int t = static_cast<int>(q.size());
    std::vector<float> out(std::size_t(Hq) * D);
    for (int h = 0; h < Hq; ++h) {
      float* y = &out[std::size_t(h) * D];
      const double r = u(rng);
      if (t < 2 || r < 0.25) {
        for (int i = 0; i < D; ++i) y[i] = static_cast<float>(n(rng));
        continue;
      }
      const int lag = 1 + static_cast<int>(u(rng) * std::min(t, 40));
      const float* base = &q[std::size_t(t - lag)][std::size_t(h) * D];
      if (r < 0.5) {
        std::copy(base, base + D, y);
        continue;
      }
      static const double kEps[] = {1e-7, -1e-7, 1e-5, -1e-5, 1e-3, -1e-3, 0.1, -0.1};
      const double eps = kEps[static_cast<int>(u(rng) * 8)];
      std::vector<double> dir(D);
      double nn = 0;
      for (double& v : dir) v = n(rng), nn += v * v;
      const double scale = std::sqrt(threshold * (1 + eps) / nn);
      for (int i = 0; i < D; ++i) y[i] = static_cast<float>(base[i] + scale * dir[i]);
    }
    q.push_back(out);
    return out;
  }
};

struct SideBySide {
  long head_steps = 0, hits = 0, ties = 0, rows_scan = 0, rows_pruned = 0;
};

SideBySide run_side_by_side(SessionOptions opt, int steps, std::uint64_t seed) {
  const Problem& p = opt.shape;
  const int Hq = p.q_heads, Hkv = p.kv_heads, D = p.head_dim;
  SessionOptions po = opt;
  opt.engine.match_mode = MatchMode::scan;
  po.engine.match_mode = MatchMode::pruned;
  Session scan(opt), pruned(po);
  const int n = p.batch;
  std::vector<Adversary> adv;
  std::vector<int> ids;
  for (int r = 0; r < n; ++r) {
    adv.push_back({Hq, Hkv, D, match_threshold(D, opt.mac.tau), std::mt19937_64(seed + r), {}});
    ids.push_back(scan.add_request());
    EXPECT_EQ(pruned.add_request(), ids.back());
  }
  std::mt19937_64 kv_rng(seed ^ 0xabcdef);
  std::normal_distribution<float> kn(0.0f, 1.0f);
  SideBySide sum;
  for (int t = 0; t < steps; ++t) {
    std::vector<float> q, k(std::size_t(n) * Hkv * D), v(k.size());
    for (int r = 0; r < n; ++r) {
      const std::vector<float> qr = adv[std::size_t(r)].next();
      q.insert(q.end(), qr.begin(), qr.end());
    }
    for (float& x : k) x = kn(kv_rng);
    for (float& x : v) x = kn(kv_rng);
    std::vector<float> oa(q.size()), ob(q.size());
    const Session::Result& a = scan.step_into(ids, q, k, v, oa);
    const Session::Result& b = pruned.step_into(ids, q, k, v, ob);
    SCOPED_TRACE("step " + std::to_string(t));
    for (std::size_t i = 0; i < a.decisions.size(); ++i) {
      const HeadDecision &x = a.decisions[i], &y = b.decisions[i];
      EXPECT_EQ(x.eligible, y.eligible) << "head row " << i;
      EXPECT_EQ(x.hit, y.hit) << "head row " << i << " scan d2 " << x.d2 << " pruned " << y.d2;
      EXPECT_EQ(x.p, y.p) << "head row " << i << " scan d2 " << x.d2 << " pruned " << y.d2;
      EXPECT_EQ(x.start, y.start) << "head row " << i;
      if (x.hit && opt.mac.pick == PickRule::nearest) {
        EXPECT_EQ(std::memcmp(&x.d2, &y.d2, sizeof x.d2), 0) << x.d2 << " vs " << y.d2;
      }
      sum.head_steps += x.eligible;
      sum.hits += x.hit;
    }
    EXPECT_EQ(std::memcmp(oa.data(), ob.data(), oa.size() * sizeof(float)), 0) << "outputs differ";
    sum.rows_scan += a.stats.match_rows_read;
    sum.rows_pruned += b.stats.match_rows_read;
    if (::testing::Test::HasFailure()) break;
  }
  return sum;
}

struct DecisionCase {
  Isa isa;
  DType dtype;
  int head_dim;
  PickRule pick;
  double tau;
};

class PrunedDecisions : public ::testing::TestWithParam<DecisionCase> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam().isa)) GTEST_SKIP() << isa_unsupported_reason(GetParam().isa);
  }
};

TEST_P(PrunedDecisions, EqualTheExhaustiveScanOnAdversarialStreams) {
  const DecisionCase c = GetParam();
  SessionOptions o;
  o.shape.batch = 2;
  o.shape.kv_heads = 2;
  o.shape.q_heads = 8;
  o.shape.head_dim = c.head_dim;
  o.shape.kv_dtype = c.dtype;
  o.shape.page_size = 16;
  o.mac.ring_capacity = 48;
  o.mac.band = 8;
  o.mac.min_context = 10;
  o.mac.pick = c.pick;
  o.mac.tau = c.tau;
  o.engine.isa = isa_name(c.isa);
  o.engine.threads = 2;
  o.engine.chunk_tokens = 16;
  o.max_context = 256;
  const SideBySide s = run_side_by_side(o, 120, 17 + c.head_dim);
  EXPECT_GT(s.hits, s.head_steps / 5);
  EXPECT_LT(s.hits, s.head_steps);
  EXPECT_LT(s.rows_pruned, s.rows_scan) << "the bound pruned nothing";
}

std::vector<DecisionCase> decision_cases() {
  std::vector<DecisionCase> out;
  for (const Isa isa : kAllIsas)
    for (const DType dt : {DType::f32, DType::bf16})
      for (const int D : {64, 128})
        for (const PickRule pick : {PickRule::nearest, PickRule::newest})
          for (const double tau : {0.3, 0.45, 0.75}) out.push_back({isa, dt, D, pick, tau});
  return out;
}

std::string decision_name(const DecisionCase& c) {
  std::string tau = std::to_string(static_cast<int>(std::lround(c.tau * 100)));
  return std::string(isa_name(c.isa)) + "_" + std::string(dtype_name(c.dtype)) + "_Hd" +
         std::to_string(c.head_dim) + "_" + std::string(name_of(c.pick)) + "_Tau" + tau;
}

INSTANTIATE_TEST_SUITE_P(Random, PrunedDecisions, ::testing::ValuesIn(decision_cases()),
                         [](const auto& i) { return decision_name(i.param); });

// ---- The fp64 reference's streams.

class PrunedReference : public ::testing::TestWithParam<std::tuple<Isa, DType, int, PickRule>> {
 protected:
  void SetUp() override {
    const Isa isa = std::get<0>(GetParam());
    if (!isa_supported(isa)) GTEST_SKIP() << isa_unsupported_reason(isa);
  }
};

TEST_P(PrunedReference, MatchesTheReference) {
  const auto [isa, dt, D, pick] = GetParam();
  SessionOptions o;
  o.shape.batch = 3;
  o.shape.kv_heads = 2;
  o.shape.q_heads = 8;
  o.shape.head_dim = D;
  o.shape.kv_dtype = dt;
  o.shape.page_size = 16;
  o.mac.ring_capacity = 24;
  o.mac.band = 8;
  o.mac.min_context = 20;
  o.mac.pick = pick;
  o.engine.chunk_tokens = 8;
  o.engine.threads = 2;
  o.engine.isa = isa_name(isa);
  o.engine.match_mode = MatchMode::pruned;
  o.max_context = 256;
  RunPlan plan;
  plan.steps = 72;
  plan.seed = 7 + D;
  const RunSummary s = run_against_reference(o, plan);
  EXPECT_GT(s.hits, s.head_steps / 10);
  EXPECT_GT(s.misses_eligible, s.head_steps / 10);
}

INSTANTIATE_TEST_SUITE_P(Grid, PrunedReference,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(64, 128, 256),
                                            ::testing::Values(PickRule::nearest, PickRule::newest)),
                         [](const auto& i) {
                           return std::string(isa_name(std::get<0>(i.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(i.param))) + "_Hd" +
                                  std::to_string(std::get<2>(i.param)) + "_" +
                                  std::string(name_of(std::get<3>(i.param)));
                         });

}  // namespace
}  // namespace mactune::cpu::test
