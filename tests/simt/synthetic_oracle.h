// A one-step fp64 oracle for a cuda::Session after prefill_synthetic: the host replays the
// synthetic prefill's KV and ring (the same hash functions as kernels/cuda/step_kernels.cu), keeps
// every appended token, and computes each step's decisions, outputs and ring entries with the
// state algebra of kernels/reference.h. It makes long contexts and full rings cheap to check: the
// reference would have to run every step of the prefix, the oracle only the steps compared.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cuda/session.h"
#include "kernels/forced.h"
#include "kernels/reference.h"
#include "kernels/rope.h"
#include "kernels/stats.h"

namespace mactune::simt::testing {

inline float synthetic_unit(std::uint64_t h) {
  return (static_cast<float>((h >> 40) & 0xffffff) + 0.5f) * (2.0f / 16777216.0f) - 1.0f;
}

class SyntheticOracle {
 public:
  struct Request {
    int len = 0;
    // KV per group [pos][D] as stored (bf16 values).
    std::vector<std::vector<float>> k, v;
    // Ring per head: [K] slots.
    std::vector<std::vector<float>> ring_q, ring_o;  // [Hq][K * D]
    std::vector<std::vector<float>> ring_lse;        // [Hq][K]
    std::vector<int> ring_pos;                       // [K]
  };

  SyntheticOracle(const cuda::SessionOptions& o) : o_(o) {}

  // The state prefill_synthetic(id, len, seed) leaves (step_kernels.cu's synthetic kernels).
  void prefill(int len, std::uint64_t seed) {
    const Problem& s = o_.shape;
    const int D = s.head_dim, K = o_.mac.ring_capacity, Hq = s.q_heads, Hkv = s.kv_heads;
    Request r;
    r.len = len;
    r.k.assign(Hkv, {});
    r.v.assign(Hkv, {});
    for (int g = 0; g < Hkv; ++g) {
      r.k[g].resize(static_cast<std::size_t>(len) * D);
      r.v[g].resize(static_cast<std::size_t>(len) * D);
    }
    for (long long pos = 0; pos < len; ++pos)
      for (int g = 0; g < Hkv; ++g)
        for (int d = 0; d < D; ++d) {
          const std::uint64_t e = (static_cast<std::uint64_t>(pos) * Hkv + g) * D + d;
          const std::uint64_t h =
              ::mactune::detail::splitmix64(seed ^ ::mactune::detail::splitmix64(e));
          r.k[g][pos * D + d] = round(synthetic_unit(h));
          r.v[g][pos * D + d] = round(synthetic_unit(::mactune::detail::splitmix64(h)));
        }
    if (o_.mac_enabled) {
      r.ring_q.assign(Hq, std::vector<float>(static_cast<std::size_t>(K) * D));
      r.ring_o.assign(Hq, std::vector<float>(static_cast<std::size_t>(K) * D));
      r.ring_lse.assign(Hq, std::vector<float>(K));
      r.ring_pos.assign(K, -1);
      const int last = len - 1;
      for (int sl = 0; sl < K; ++sl) {
        const int newest = last - ((last - sl) % K + K) % K;
        const int pos = newest >= 0 ? newest : -1;
        r.ring_pos[sl] = pos;
        const int ce = pos >= 0 ? cache_end(pos, o_.mac.band) : 0;
        for (int h = 0; h < Hq; ++h)
          for (int d = 0; d < D; ++d) {
            const std::uint64_t e = (static_cast<std::uint64_t>(sl) * Hq + h) * D + d;
            const std::uint64_t hash =
                ::mactune::detail::splitmix64(~seed ^ ::mactune::detail::splitmix64(e));
            r.ring_q[h][static_cast<std::size_t>(sl) * D + d] = round(synthetic_unit(hash));
            const float ov = ce > 0 ? synthetic_unit(::mactune::detail::splitmix64(hash)) : 0.0f;
            r.ring_o[h][static_cast<std::size_t>(sl) * D + d] = round_summary(ov);
            if (d == 0)
              r.ring_lse[h][sl] =
                  ce > 0 ? logf(static_cast<float>(ce)) + 0.25f * synthetic_unit(hash >> 7)
                         : -std::numeric_limits<float>::infinity();
          }
      }
    }
    requests_.push_back(std::move(r));
  }

  const Request& request(int id) const { return requests_[static_cast<std::size_t>(id)]; }

  struct Step {
    std::vector<double> out;              // [n, Hq, D]
    std::vector<HeadDecision> decisions;  // [n, Hq]
    std::vector<ref::State> entries;      // [n, Hq] the new ring entries (MAC)
    StepStats stats;
    std::vector<GroupInfo> groups;
    long long demoted_groups = 0;  // group_hits: groups whose hits became misses
  };

  // One step of requests ids (all distinct) with pre-RoPE q [n, Hq, D], k, v [n, Hkv, D].
  Step step(const std::vector<int>& ids, const std::vector<float>& q, const std::vector<float>& k,
            const std::vector<float>& v) {
    const Problem& s = o_.shape;
    const int D = s.head_dim, Hq = s.q_heads, Hkv = s.kv_heads, G = Hq / Hkv;
    const int K = o_.mac.ring_capacity, band = o_.mac.band;
    const int n = static_cast<int>(ids.size());
    Step st;
    st.out.assign(static_cast<std::size_t>(n) * Hq * D, 0.0);
    st.decisions.resize(static_cast<std::size_t>(n) * Hq);
    st.entries.assign(static_cast<std::size_t>(n) * Hq, ref::State(D));
    long long kv_before = 0;
    const double threshold = match_threshold(D, o_.mac.tau);
    for (int b = 0; b < n; ++b) {
      Request& r = requests_[static_cast<std::size_t>(ids[static_cast<std::size_t>(b)])];
      const int m = r.len, kv_len = m + 1, ce = cache_end(m, band);
      const RopeAngles ang = rope_angles(D, m, o_.rope_theta);
      std::vector<double> kr(static_cast<std::size_t>(D));
      for (int g = 0; g < Hkv; ++g) {  // append the token
        apply_rope(&k[(static_cast<std::size_t>(b) * Hkv + g) * D], kr.data(), D, ang);
        for (int d = 0; d < D; ++d) {
          r.k[g].push_back(round(static_cast<float>(kr[d])));
          r.v[g].push_back(round(v[(static_cast<std::size_t>(b) * Hkv + g) * D + d]));
        }
      }
      HeadDecision* row_dec = &st.decisions[static_cast<std::size_t>(b) * Hq];
      for (int h = 0; h < Hq; ++h) {  // the row's decisions first: group_hits needs them all
        const float* qh = &q[(static_cast<std::size_t>(b) * Hq + h) * D];
        std::vector<double> q_ring(D);
        for (int d = 0; d < D; ++d) q_ring[d] = round(qh[d]);
        HeadDecision& dec = row_dec[h];
        dec = HeadDecision{};
        if (o_.mac_enabled && m >= o_.mac.min_context) {
          dec.eligible = true;
          match(r, h, q_ring, m, threshold, dec);
          if (o_.forced.enabled) {
            const ForcedSite at{b, n, h, Hq, Hkv, m, kv_before};
            const ForcedChoice c = forced_choice(o_.forced, steps_, at, K, band);
            dec.hit = c.hit && valid(r, h, m - c.lag);
            dec.p = dec.hit ? m - c.lag : -1;
          }
          dec.start = dec.hit ? cache_end(dec.p, band) : 0;
        }
      }
      if (o_.mac_enabled && o_.mac.group_hits) st.demoted_groups += demote(row_dec, Hkv, G);
      for (int h = 0; h < Hq; ++h) {
        const float* qh = &q[(static_cast<std::size_t>(b) * Hq + h) * D];
        std::vector<double> q_rot(D);
        apply_rope(qh, q_rot.data(), D, ang);
        const HeadDecision& dec = row_dec[h];
        const int g = h / G;
        ref::State result(D);
        if (!o_.mac_enabled) {
          result = attend(r, g, q_rot, 0, kv_len);
        } else {
          ref::State prefix(D);
          if (dec.hit) {
            const int sl = ring_slot(dec.p, K);
            for (int d = 0; d < D; ++d)
              prefix.o[d] = r.ring_o[h][static_cast<std::size_t>(sl) * D + d];
            prefix.lse = r.ring_lse[h][sl];
          }
          ref::State& entry = st.entries[static_cast<std::size_t>(b) * Hq + h];
          entry = ref::merge(prefix, attend(r, g, q_rot, dec.start, ce));
          result = ref::merge(entry, attend(r, g, q_rot, ce, kv_len));
        }
        std::copy(result.o.begin(), result.o.end(),
                  st.out.begin() + (static_cast<std::ptrdiff_t>(b) * Hq + h) * D);
      }
      account_request(s, o_.mac, m, &st.decisions[static_cast<std::size_t>(b) * Hq], st.groups,
                      st.stats, o_.mac_enabled);
      if (o_.mac_enabled) {  // ring writes last
        const int sl = ring_slot(m, K);
        r.ring_pos[sl] = m;
        for (int h = 0; h < Hq; ++h) {
          const ref::State& e = st.entries[static_cast<std::size_t>(b) * Hq + h];
          const float* qh = &q[(static_cast<std::size_t>(b) * Hq + h) * D];
          for (int d = 0; d < D; ++d) {
            r.ring_q[h][static_cast<std::size_t>(sl) * D + d] = round(qh[d]);
            r.ring_o[h][static_cast<std::size_t>(sl) * D + d] =
                round_summary(static_cast<float>(e.o[d]));
          }
          r.ring_lse[h][sl] = static_cast<float>(e.lse);
        }
      }
      kv_before += m + 1;
      ++r.len;
    }
    ++steps_;
    return st;
  }

 private:
  float round(float x) const { return static_cast<float>(round_to(o_.shape.kv_dtype, x)); }
  float round_summary(float x) const {
    return static_cast<float>(round_to(o_.mac.summary_dtype, x));
  }
  // group_hits (DESIGN.md section 8), written here from the rule: a group with an eligible head
  // that misses loses its hits (plain misses from 0). Returns how many groups lost some.
  static int demote(HeadDecision* dec, int kv_heads, int G) {
    int demoted = 0;
    for (int g = 0; g < kv_heads; ++g) {
      HeadDecision* d = dec + static_cast<std::ptrdiff_t>(g) * G;
      int hits = 0, eligible_misses = 0;
      for (int j = 0; j < G; ++j) {
        hits += d[j].hit;
        eligible_misses += d[j].eligible && !d[j].hit;
      }
      if (hits == 0 || eligible_misses == 0) continue;
      ++demoted;
      for (int j = 0; j < G; ++j)
        if (d[j].hit) d[j].hit = false, d[j].p = -1, d[j].start = 0;
    }
    return demoted;
  }
  bool valid(const Request& r, int h, int p) const {
    if (p < 0) return false;
    const int sl = ring_slot(p, o_.mac.ring_capacity);
    return r.ring_pos[sl] == p && r.ring_lse[h][sl] > -std::numeric_limits<float>::infinity();
  }
  // ref::match over the host ring: fp64 d^2, ties to the older position, newest under threshold.
  void match(const Request& r, int h, const std::vector<double>& q, int m, double threshold,
             HeadDecision& dec) const {
    const int D = o_.shape.head_dim, K = o_.mac.ring_capacity;
    const bool norm = o_.mac.pick == PickRule::normalized;
    auto scale = [&](const double* x) {
      if (!norm) return 1.0;
      double n2 = 0;
      for (int i = 0; i < D; ++i) n2 += x[i] * x[i];
      return n2 > 0 ? std::sqrt(static_cast<double>(D) / n2) : 1.0;
    };
    const double sq = scale(q.data());
    double best = std::numeric_limits<double>::infinity();
    int best_p = -1, newest = -1;
    std::vector<double> e(D);
    for (int p = std::max(0, m - K); p < m; ++p) {
      if (!valid(r, h, p)) continue;
      const float* rq = &r.ring_q[h][static_cast<std::size_t>(ring_slot(p, K)) * D];
      for (int i = 0; i < D; ++i) e[i] = rq[i];
      const double se = scale(e.data());
      double d2 = 0;
      for (int i = 0; i < D; ++i) d2 += (q[i] * sq - e[i] * se) * (q[i] * sq - e[i] * se);
      if (d2 < best) {
        best = d2;
        best_p = p;
      }
      if (d2 < threshold) newest = p;
    }
    dec.d2 = static_cast<float>(best);
    if (o_.mac.tau >= 1.0 || best_p < 0) return;
    if (o_.mac.pick == PickRule::newest) {
      dec.hit = newest >= 0;
      dec.p = newest;
    } else {
      dec.hit = best < threshold;
      dec.p = dec.hit ? best_p : -1;
    }
  }
  ref::State attend(const Request& r, int g, const std::vector<double>& q, int begin,
                    int end) const {
    const int D = o_.shape.head_dim;
    ref::State s(D);
    if (begin >= end) return s;
    const double scale = o_.shape.scale();
    std::vector<double> score(static_cast<std::size_t>(end - begin));
    double mx = -std::numeric_limits<double>::infinity();
    for (int j = begin; j < end; ++j) {
      const float* kk = &r.k[g][static_cast<std::size_t>(j) * D];
      double dot = 0;
      for (int i = 0; i < D; ++i) dot += q[i] * kk[i];
      score[j - begin] = scale * dot;
      mx = std::max(mx, score[j - begin]);
    }
    double z = 0;
    for (double x : score) z += std::exp(x - mx);
    s.lse = mx + std::log(z);
    for (int j = begin; j < end; ++j) {
      const double w = std::exp(score[j - begin] - s.lse);
      const float* vv = &r.v[g][static_cast<std::size_t>(j) * D];
      for (int i = 0; i < D; ++i) s.o[i] += w * vv[i];
    }
    return s;
  }

  cuda::SessionOptions o_;
  std::vector<Request> requests_;
  std::uint64_t steps_ = 0;
};

}  // namespace mactune::simt::testing
