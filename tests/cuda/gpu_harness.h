// Shared pieces of the GPU tests: inputs that make real matching hit, the side-by-side run of
// a cuda::Session against the fp64 reference, and error accounting calibrated to the KV dtype.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"
#include "kernels/cuda/session.h"
#include "kernels/reference.h"

// GPU tests report Skipped, with the reason, where no GPU is usable.
#define MACTUNE_REQUIRE_GPU()                                                     \
  do {                                                                            \
    if (!::mactune::cuda::gpu_status().usable)                                    \
      GTEST_SKIP() << "no usable GPU: " << ::mactune::cuda::gpu_status().why_not; \
  } while (0)

namespace mactune::cuda::testing {

// Pre-RoPE queries, keys and values of several requests. A head's query repeats one of its
// earlier queries exactly (d^2 = 0), or perturbed (a hit with d^2 > 0), or is fresh (random
// queries are far apart: d^2 ~ 2 D >> the threshold), so groups come out all-hit, mixed and
// all-miss. Never zeros.
class Inputs {
 public:
  Inputs(const Problem& p, int band, std::uint64_t seed)
      : hq_(p.q_heads), hkv_(p.kv_heads), d_(p.head_dim), band_(band), rng_(seed) {}

  void next(int request, std::vector<float>& q, std::vector<float>& k, std::vector<float>& v) {
    if (static_cast<int>(history_.size()) <= request) history_.resize(request + 1);
    auto& hist = history_[static_cast<std::size_t>(request)];  // [step][hq * D]
    const int t = static_cast<int>(hist.size());
    std::vector<float> qs(static_cast<std::size_t>(hq_) * d_);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (int h = 0; h < hq_; ++h) {
      float* dst = &qs[static_cast<std::size_t>(h) * d_];
      const double roll = u(rng_);
      // An earlier step whose ring entry is non-empty (p >= band) and still in a small ring.
      const int lo = std::max(band_, t - 24), hi = t - 1;
      if (hi >= lo && roll < 0.55) {
        const int src = std::uniform_int_distribution<int>(lo, hi)(rng_);
        const float* from = &hist[static_cast<std::size_t>(src)][static_cast<std::size_t>(h) * d_];
        const float noise = roll < 0.3 ? 0.0f : 0.15f;
        for (int i = 0; i < d_; ++i) dst[i] = from[i] + noise * n(rng_);
      } else {
        for (int i = 0; i < d_; ++i) dst[i] = nonzero(n(rng_));
      }
    }
    hist.push_back(qs);
    q.insert(q.end(), qs.begin(), qs.end());
    for (int i = 0; i < hkv_ * d_; ++i) k.push_back(nonzero(n(rng_)));
    for (int i = 0; i < hkv_ * d_; ++i) v.push_back(nonzero(n(rng_)));
  }

 private:
  static float nonzero(float x) { return x == 0.0f ? 0.5f : x; }
  int hq_, hkv_, d_, band_;
  std::mt19937_64 rng_;
  std::vector<std::vector<std::vector<float>>> history_;
};

// sqrt(sum |got - want|^2 / sum |want|^2), accumulated over many heads.
struct RelErr {
  double num = 0.0, den = 0.0, worst_head = 0.0;
  void add(const float* got, const double* want, int n) {
    double a = 0.0, b = 0.0;
    for (int i = 0; i < n; ++i) {
      a += (got[i] - want[i]) * (got[i] - want[i]);
      b += want[i] * want[i];
    }
    num += a;
    den += b;
    if (b > 0) worst_head = std::max(worst_head, std::sqrt(a / b));
  }
  void add(const double* got, const double* want, int n) {
    std::vector<float> g(got, got + n);
    add(g.data(), want, n);
  }
  double rel() const { return den > 0 ? std::sqrt(num / den) : 0.0; }
};

struct Case {
  std::string name;
  Problem shape;
  MacParams mac;
  bool mac_enabled = true;
  EngineConfig engine;
  ForcedHits forced;
  int requests = 3;
  int steps = 72;
  // Steps the reference only appends (ref::Session::append) before it attends: long contexts
  // at the cost of the last steps only. Compared are the steps from fast_forward + K on, when
  // every ring candidate was written by a step both ran.
  int fast_forward = 0;
};

struct Outcome {
  RelErr gpu;    // the session vs the fp64 reference at the KV dtype
  RelErr store;  // the reference at the KV dtype vs the reference at f32: the dtype's own error
  RelErr ring;   // ring summaries vs the reference's
  long long hits = 0, eligible = 0, mixed_groups = 0;
  // group_hits: groups that were mixed before the demotion (a reference without group_hits
  // beside the others: the ring's q~ and validity do not depend on it, so it matches alike).
  long long demoted_groups = 0;
};

inline bool same_decision(const HeadDecision& a, const HeadDecision& b) {
  return a.eligible == b.eligible && a.hit == b.hit && a.gate_rejected == b.gate_rejected &&
         a.p == b.p && a.start == b.start;
}

// Runs the case through a cuda::Session (outputs poisoned before every step) and through the
// reference at the KV dtype and at f32, comparing every output, decision, group and ring entry.
inline Outcome run_against_reference(const Case& c) {
  SessionOptions o;
  o.shape = c.shape;
  o.mac = c.mac;
  o.mac_enabled = c.mac_enabled;
  o.forced = c.forced;
  o.engine = c.engine;
  o.engine.poison = true;
  o.max_context = c.steps + 8;
  Session gpu(o);
  ref::Session ref(c.shape, c.mac, kDefaultRopeTheta, c.mac_enabled);
  Problem f32 = c.shape;
  f32.kv_dtype = DType::f32;
  ref::Session ref32(f32, c.mac, kDefaultRopeTheta, c.mac_enabled);
  MacParams ungrouped = c.mac;
  ungrouped.group_hits = false;
  const bool grouped = c.mac_enabled && c.mac.group_hits;
  ref::Session before(c.shape, ungrouped, kDefaultRopeTheta, c.mac_enabled);
  ref.set_forced(c.forced);
  ref32.set_forced(c.forced);
  before.set_forced(c.forced);
  for (int r = 0; r < c.requests; ++r) {
    EXPECT_EQ(gpu.add_request(), r);
    EXPECT_EQ(ref.add_request(), r);
    EXPECT_EQ(ref32.add_request(), r);
    EXPECT_EQ(before.add_request(), r);
  }
  Inputs in(c.shape, c.mac.band, 0x5eed ^ std::hash<std::string>{}(c.name));
  const int Hq = c.shape.q_heads, D = c.shape.head_dim;
  const float threshold = static_cast<float>(match_threshold(D, c.mac.tau));
  // A miss's d2 is a lower bound (>= the threshold), not the exhaustive minimum, when the match
  // skips rows: the probe instances, and the pruned match.
  const bool probe =
      c.engine.match.find("_p1_") != std::string::npos || c.engine.match_mode == MatchMode::pruned;
  Outcome out;
  for (int t = 0; t < c.steps; ++t) {
    // Request r takes part in a step unless t % (r + 2) == 1: lengths drift apart.
    std::vector<int> ids;
    std::vector<float> q, k, v;
    for (int r = 0; r < c.requests; ++r)
      if (t % (r + 2) != 1 || r == 0) {
        ids.push_back(r);
        in.next(r, q, k, v);
      }
    std::vector<float> got(ids.size() * Hq * D, std::numeric_limits<float>::quiet_NaN());
    const Session::Result& g = gpu.step_into(ids, q, k, v, got);
    EXPECT_TRUE(g.out.empty()) << "step_into leaves Result::out empty";
    if (t < c.fast_forward) {
      ref.append(ids, k, v);
      ref32.append(ids, k, v);
      if (grouped) before.append(ids, k, v);
      continue;
    }
    const ref::Session::Result want = ref.step(ids, q, k, v);
    const ref::Session::Result want32 = ref32.step(ids, q, k, v);
    const ref::Session::Result ungrouped_want =
        grouped ? before.step(ids, q, k, v) : ref::Session::Result{};
    if (t < c.fast_forward + c.mac.ring_capacity) continue;  // candidates the reference lacks
    for (std::size_t i = 0; i < got.size(); ++i)
      if (!std::isfinite(got[i])) {
        ADD_FAILURE() << c.name << " step " << t << ": output " << i << " not written (or NaN)";
        return out;
      }
    for (std::size_t h = 0; h < ids.size() * Hq; ++h) {
      out.gpu.add(&got[h * D], &want.out[h * D], D);
      out.store.add(&want.out[h * D], &want32.out[h * D], D);
      const HeadDecision& a = g.decisions[h];
      const HeadDecision& b = want.decisions[h];
      EXPECT_TRUE(same_decision(a, b))
          << c.name << " step " << t << " head " << h << ": gpu hit " << a.hit << " p " << a.p
          << " start " << a.start << " d2 " << a.d2 << ", reference hit " << b.hit << " p " << b.p
          << " start " << b.start << " d2 " << b.d2;
      if (b.eligible && std::isfinite(b.d2)) {
        if (probe && !b.hit) {
          EXPECT_GE(a.d2, threshold) << c.name << " step " << t << " head " << h;
          EXPECT_LE(a.d2, b.d2 * (1 + 1e-5) + 1e-3) << c.name << " step " << t << " head " << h;
        } else {
          EXPECT_NEAR(a.d2, b.d2, 1e-4 * std::max(1.0f, std::abs(b.d2)) + 1e-3)
              << c.name << " step " << t << " head " << h;
        }
      }
      out.hits += b.hit;
      out.eligible += b.eligible;
    }
    EXPECT_EQ(g.groups.size(), want.groups.size());
    for (std::size_t i = 0; i < std::min(g.groups.size(), want.groups.size()); ++i) {
      EXPECT_EQ(g.groups[i].mode, want.groups[i].mode) << c.name << " step " << t;
      EXPECT_EQ(g.groups[i].begin, want.groups[i].begin) << c.name << " step " << t;
      out.mixed_groups += want.groups[i].mode == GroupMode::mixed;
      if (grouped && ungrouped_want.groups[i].mode == GroupMode::mixed) {
        ++out.demoted_groups;
        EXPECT_EQ(want.groups[i].mode, GroupMode::all_miss) << c.name << " step " << t;
      }
    }
    EXPECT_EQ(g.stats.kv_tokens_read, want.stats.kv_tokens_read) << c.name << " step " << t;
    EXPECT_EQ(g.stats.modeled_bytes(), want.stats.modeled_bytes()) << c.name << " step " << t;
    EXPECT_EQ(g.stats.guard_fires, want.stats.guard_fires) << c.name << " step " << t;
    if (::testing::Test::HasFailure()) return out;
  }
  if (c.mac_enabled) {  // the ring entries of the last K positions of every request and head
    for (int r = 0; r < c.requests; ++r) {
      const int len = gpu.length(r);
      EXPECT_EQ(len, ref.length(r));
      for (int pos = std::max(0, len - c.mac.ring_capacity); pos < len; ++pos)
        for (int h = 0; h < Hq; ++h) {
          const Session::RingEntry e = gpu.ring_entry(r, h, pos);
          const ref::RingEntry& w = ref.ring_entry(r, h, pos);
          if (e.pos != w.pos) {
            ADD_FAILURE() << c.name << " request " << r << " pos " << pos << ": ring slot holds "
                          << e.pos << ", reference " << w.pos;
            return out;
          }
          for (int i = 0; i < D; ++i)
            if (e.q[i] != static_cast<float>(w.q[i])) {
              ADD_FAILURE() << c.name << " ring q~ differs at pos " << pos << " dim " << i;
              return out;
            }
          if (w.summary.empty()) {
            EXPECT_TRUE(std::isinf(e.lse) && e.lse < 0) << c.name << " pos " << pos;
          } else {
            EXPECT_NEAR(e.lse, w.summary.lse, 1e-4 * std::max(1.0, std::abs(w.summary.lse)))
                << c.name << " ring lse, pos " << pos << " head " << h;
            out.ring.add(e.o.data(), w.summary.o.data(), D);
          }
        }
    }
  }
  return out;
}

}  // namespace mactune::cuda::testing
