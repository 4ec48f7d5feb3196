// Test harness of the CPU engine: random decode streams with recurring queries, and a runner
// that steps cpu::Session and the fp64 ref::Session side by side and checks, step by step,
// decisions, groups, stats, outputs (poisoned first, fully written) and ring entries.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/session.h"
#include "kernels/reference.h"

namespace mactune {
// Test names and ctest lines show "bf16", not "1-byte object <02>".
inline void PrintTo(DType t, std::ostream* os) {
  *os << dtype_name(t);
}
}  // namespace mactune

namespace mactune::cpu::test {

// Pre-RoPE inputs of one request, drawn N(0, 1), never zero. Per head, from step `recur_from`
// on, about half of the queries repeat an earlier query of the same head (lag uniform in
// [1, max_lag]) plus N(0, noise^2) noise: near-duplicates that hit, fresh ones that miss,
// and mixed groups. Distances therefore never tie, except through storage rounding.
struct Stream {
  int Hq, Hkv, D;
  int recur_from = 0, max_lag = 16;
  double noise = 0.05, recur_prob = 0.5;
  std::mt19937_64 rng;
  std::vector<std::vector<float>> q, k, v;  // [step][heads * D]

  Stream(const Problem& p, std::uint64_t seed)
      : Hq(p.q_heads), Hkv(p.kv_heads), D(p.head_dim), rng(seed) {}

  float randn() {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    float x = 0.0f;
    while (x == 0.0f) x = nd(rng);
    return x;
  }
  void grow(int steps) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    while (static_cast<int>(q.size()) < steps) {
      const int t = static_cast<int>(q.size());
      std::vector<float> qt(std::size_t(Hq) * D);
      for (int h = 0; h < Hq; ++h) {
        const bool recur = t >= recur_from && t > 0 && u(rng) < recur_prob;
        const int lag = 1 + static_cast<int>(u(rng) * std::min(max_lag, t));
        for (int i = 0; i < D; ++i) {
          const std::size_t at = std::size_t(h) * D + i;
          qt[at] =
              recur ? q[std::size_t(t - lag)][at] + static_cast<float>(noise) * randn() : randn();
        }
      }
      q.push_back(std::move(qt));
      std::vector<float> kt(std::size_t(Hkv) * D), vt(kt.size());
      for (float& x : kt) x = randn();
      for (float& x : vt) x = randn();
      k.push_back(std::move(kt));
      v.push_back(std::move(vt));
    }
  }
};

inline double rel_err(const float* a, const double* b, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// What a side-by-side run saw, for tests to assert coverage (hits happened, etc.).
struct RunSummary {
  int steps = 0;
  int head_steps = 0, hits = 0, misses_eligible = 0, gate_rejections = 0, guard_fires = 0;
  int mixed_groups = 0;
  double max_out_err = 0, max_entry_err = 0;
  // Over the whole run: ||engine - reference|| / ||reference|| of all outputs and of all ring
  // summaries taken as one vector each, and the summary elements that differ at all.
  double sq_out_diff = 0, sq_out_norm = 0, sq_entry_diff = 0, sq_entry_norm = 0;
  long entry_elements = 0, entry_elements_differing = 0;
  double rms_out_err() const { return std::sqrt(sq_out_diff / sq_out_norm); }
  double rms_entry_err() const { return std::sqrt(sq_entry_diff / sq_entry_norm); }
};

struct RunPlan {
  int steps = 80;    // steps of the first request
  int requests = 3;  // request r joins at step r * join_gap and sits out every (r + 2)-th step
  int join_gap = 17;
  double tol = 1e-5;  // relative error of outputs and ring summaries vs the reference
  std::uint64_t seed = 1;
  int recur_from = 0, max_lag = 16;
};

// Steps cpu::Session and ref::Session on the same inputs and checks everything per step.
// Stops at the first step with a failure (the trace names the step).
inline RunSummary run_against_reference(const SessionOptions& opt, const RunPlan& plan) {
  const Problem& p = opt.shape;
  const int Hq = p.q_heads, Hkv = p.kv_heads, D = p.head_dim;
  ref::Session ref(p, opt.mac, opt.rope_theta, opt.mac_enabled);
  if (opt.forced.enabled) ref.set_forced(opt.forced);
  Session eng(opt);
  std::vector<Stream> in;
  std::vector<int> ids;
  RunSummary sum;
  for (int t = 0; t < plan.steps; ++t) {
    for (int r = static_cast<int>(ids.size()); r < plan.requests && t >= r * plan.join_gap; ++r) {
      in.emplace_back(p, plan.seed * 1000 + r);
      in.back().recur_from = plan.recur_from;
      in.back().max_lag = plan.max_lag;
      const int a = ref.add_request(), b = eng.add_request();
      EXPECT_EQ(a, b);
      ids.push_back(b);
    }
    std::vector<int> batch;
    std::vector<float> q, k, v;
    for (std::size_t r = 0; r < ids.size(); ++r) {
      if (r > 0 && t % static_cast<int>(r + 2) == 0) continue;  // sits out: lengths diverge
      const int m = eng.length(ids[r]);
      EXPECT_EQ(m, ref.length(ids[r]));
      in[r].grow(m + 1);
      batch.push_back(ids[r]);
      q.insert(q.end(), in[r].q[std::size_t(m)].begin(), in[r].q[std::size_t(m)].end());
      k.insert(k.end(), in[r].k[std::size_t(m)].begin(), in[r].k[std::size_t(m)].end());
      v.insert(v.end(), in[r].v[std::size_t(m)].begin(), in[r].v[std::size_t(m)].end());
    }
    const int n = static_cast<int>(batch.size());
    std::vector<int> pos(batch.size());
    for (int b = 0; b < n; ++b) pos[std::size_t(b)] = eng.length(batch[std::size_t(b)]);
    SCOPED_TRACE("step " + std::to_string(t) + " (batch of " + std::to_string(n) + ")");
    std::vector<float> out(std::size_t(n) * Hq * D, std::numeric_limits<float>::quiet_NaN());
    const ref::Session::Result want = ref.step(batch, q, k, v);
    const Session::Result& got = eng.step_into(batch, q, k, v, out);
    ++sum.steps;
    // Decisions and groups.
    for (std::size_t i = 0; i < want.decisions.size(); ++i) {
      const HeadDecision &a = got.decisions[i], &b = want.decisions[i];
      EXPECT_EQ(a.eligible, b.eligible) << "head row " << i;
      EXPECT_EQ(a.hit, b.hit) << "head row " << i << " d2 " << a.d2 << " vs " << b.d2;
      EXPECT_EQ(a.p, b.p) << "head row " << i;
      EXPECT_EQ(a.start, b.start) << "head row " << i;
      EXPECT_EQ(a.gate_rejected, b.gate_rejected) << "head row " << i;
      // The pruned match reports the scan's d2 only on a nearest hit (session_step.cpp).
      const bool d2_exact = opt.engine.match_mode != MatchMode::pruned ||
                            (b.hit && opt.mac.pick == PickRule::nearest && !opt.forced.enabled);
      if (!d2_exact) {
      } else if (std::isfinite(b.d2)) {
        EXPECT_NEAR(a.d2, b.d2, 1e-4 * (1.0 + std::fabs(b.d2))) << "head row " << i;
      } else {
        EXPECT_FALSE(std::isfinite(a.d2)) << "head row " << i;
      }
      ++sum.head_steps;
      sum.hits += a.hit;
      sum.misses_eligible += a.eligible && !a.hit;
    }
    EXPECT_EQ(got.groups.size(), want.groups.size());
    for (std::size_t i = 0; i < want.groups.size() && i < got.groups.size(); ++i) {
      EXPECT_EQ(got.groups[i].mode, want.groups[i].mode);
      EXPECT_EQ(got.groups[i].begin, want.groups[i].begin);
      EXPECT_EQ(got.groups[i].cache_end, want.groups[i].cache_end);
      EXPECT_EQ(got.groups[i].kv_len, want.groups[i].kv_len);
    }
    const StepStats &gs = got.stats, &ws = want.stats;
    EXPECT_EQ(gs.kv_tokens_read, ws.kv_tokens_read);
    EXPECT_EQ(gs.kv_tokens_total, ws.kv_tokens_total);
    EXPECT_EQ(gs.head_tokens_read, ws.head_tokens_read);
    EXPECT_EQ(gs.kv_bytes_read, ws.kv_bytes_read);
    EXPECT_EQ(gs.ring_bytes_read, ws.ring_bytes_read);
    EXPECT_EQ(gs.bytes_written, ws.bytes_written);
    EXPECT_EQ(gs.hit_heads, ws.hit_heads);
    EXPECT_EQ(gs.gate_rejections, ws.gate_rejections);
    EXPECT_EQ(gs.guard_fires, ws.guard_fires);
    EXPECT_EQ(gs.groups_mixed, ws.groups_mixed);
    sum.gate_rejections += gs.gate_rejections;
    sum.guard_fires += gs.guard_fires;
    sum.mixed_groups += gs.groups_mixed;
    // Outputs: every element written, each head within tolerance of the reference.
    std::size_t unwritten = 0;
    for (float x : out) unwritten += std::isfinite(x) ? 0 : 1;
    EXPECT_EQ(unwritten, 0u) << "output elements left poisoned (not written)";
    for (int row = 0; row < n * Hq; ++row) {
      const float* a = &out[std::size_t(row) * D];
      const double* b = &want.out[std::size_t(row) * D];
      const double e = rel_err(a, b, D);
      sum.max_out_err = std::max(sum.max_out_err, e);
      for (int i = 0; i < D; ++i) {
        sum.sq_out_diff += (a[i] - b[i]) * (a[i] - b[i]);
        sum.sq_out_norm += b[i] * b[i];
      }
      EXPECT_LT(e, plan.tol) << "output of head row " << row;
    }
    // Ring entries of position m: q as stored, summary within tolerance.
    if (opt.mac_enabled)
      for (int b = 0; b < n; ++b)
        for (int h = 0; h < Hq; ++h) {
          const int m = pos[std::size_t(b)];
          const RingEntryView e = eng.ring_entry(batch[std::size_t(b)], h, m);
          const ref::RingEntry& w = ref.ring_entry(batch[std::size_t(b)], h, m);
          EXPECT_EQ(e.pos, m);
          EXPECT_EQ(w.pos, m);
          int q_diff = 0;
          for (int i = 0; i < D; ++i) q_diff += e.q[std::size_t(i)] != w.q[std::size_t(i)];
          EXPECT_EQ(q_diff, 0) << "ring q of head " << h << " differs from the reference";
          if (w.summary.empty()) {
            EXPECT_FALSE(e.lse > -std::numeric_limits<float>::infinity()) << "head " << h;
            continue;
          }
          EXPECT_NEAR(e.lse, w.summary.lse, plan.tol * (1.0 + std::fabs(w.summary.lse)));
          const double err = rel_err(e.o.data(), w.summary.o.data(), D);
          sum.max_entry_err = std::max(sum.max_entry_err, err);
          for (int i = 0; i < D; ++i) {
            const double d = e.o[std::size_t(i)] - w.summary.o[std::size_t(i)];
            sum.sq_entry_diff += d * d;
            sum.sq_entry_norm += w.summary.o[std::size_t(i)] * w.summary.o[std::size_t(i)];
            sum.entry_elements_differing += d != 0;
          }
          sum.entry_elements += D;
          EXPECT_LT(err, plan.tol) << "ring entry of head " << h;
        }
    (void)Hkv;
    if (::testing::Test::HasFailure()) break;
  }
  return sum;
}

}  // namespace mactune::cpu::test
