// The fp64 CPU reference of MAC-Attention (DESIGN.md section 1): the oracle for every kernel.
// Short and obvious rather than fast. Storage is modeled exactly (KV, ring q and summaries are
// rounded to their dtypes as an engine stores them); all arithmetic is double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/forced.h"
#include "kernels/problem.h"
#include "kernels/rope.h"
#include "kernels/state.h"
#include "kernels/stats.h"

namespace mactune::ref {

using Vec = std::vector<double>;

struct State {
  Vec o;
  double lse = neg_inf<double>();
  explicit State(int head_dim = 0) : o(static_cast<std::size_t>(head_dim), 0.0) {}
  bool empty() const { return is_empty_lse(lse); }
};

inline State merge(State a, const State& b) {
  merge_into(a.o.data(), a.lse, b.o.data(), b.lse, static_cast<int>(a.o.size()));
  return a;
}

// A = F (-) W; *guarded is set when the guard fired (A is then empty).
inline State remove(const State& f, const State& w, double guard, bool* guarded) {
  State a(static_cast<int>(f.o.size()));
  const bool fired = remove_into(a.o.data(), a.lse, f.o.data(), f.lse, w.o.data(), w.lse,
                                 static_cast<int>(f.o.size()), guard);
  if (guarded) *guarded = fired;
  return a;
}

// KV of one (request, KV head): post-RoPE keys and values, rounded to the storage dtype.
struct KvHead {
  Vec k, v;  // [len, D]
};

// State of the (post-RoPE) query q over positions [begin, end) of one KV head.
inline State attend(const double* q, const KvHead& kv, int head_dim, int begin, int end,
                    double scale) {
  State s(head_dim);
  if (begin >= end) return s;
  const std::size_t D = static_cast<std::size_t>(head_dim);
  Vec score(static_cast<std::size_t>(end - begin));
  double mx = neg_inf<double>();
  for (int j = begin; j < end; ++j) {
    double dot = 0.0;
    for (std::size_t i = 0; i < D; ++i) dot += q[i] * kv.k[j * D + i];
    score[j - begin] = scale * dot;
    mx = std::max(mx, score[j - begin]);
  }
  double z = 0.0;
  for (double x : score) z += std::exp(x - mx);
  s.lse = mx + std::log(z);
  for (int j = begin; j < end; ++j) {
    const double w = std::exp(score[j - begin] - s.lse);
    for (std::size_t i = 0; i < D; ++i) s.o[i] += w * kv.v[j * D + i];
  }
  return s;
}

// One ring entry: position, pre-RoPE query (in the ring's q dtype) and the state of q_pos over
// [0, cache_end(pos)) (o in the summary dtype, lse in f32).
struct RingEntry {
  int pos = -1;
  Vec q;
  State summary;
};

struct MatchResult {
  bool hit = false;
  int p = -1;
  double d2 = 0.0;  // best squared distance (infinity when there was no candidate)
};

// Match the rounded pre-RoPE query of step m against the ring of one (request, head).
inline MatchResult match(const std::vector<RingEntry>& ring, const Vec& q, int m,
                         const MacParams& mac) {
  const std::size_t D = q.size();
  auto normalized = [&](const Vec& x) {
    if (mac.pick != PickRule::normalized) return x;
    double n2 = 0.0;
    for (double e : x) n2 += e * e;
    Vec y = x;
    if (n2 > 0.0)
      for (double& e : y) e *= std::sqrt(static_cast<double>(D) / n2);
    return y;
  };
  const Vec qm = normalized(q);
  const double threshold = match_threshold(static_cast<int>(D), mac.tau);
  MatchResult best{false, -1, std::numeric_limits<double>::infinity()};
  int newest_under = -1;
  for (int p = std::max(0, m - mac.ring_capacity); p < m; ++p) {  // older first
    const RingEntry& e = ring[static_cast<std::size_t>(ring_slot(p, mac.ring_capacity))];
    if (e.pos != p || e.summary.empty()) continue;
    const Vec qp = normalized(e.q);
    double d2 = 0.0;
    for (std::size_t i = 0; i < D; ++i) d2 += (qm[i] - qp[i]) * (qm[i] - qp[i]);
    if (d2 < best.d2) best = {false, p, d2};  // strict: ties stay with the older position
    if (d2 < threshold) newest_under = p;
  }
  if (mac.tau >= 1.0 || best.p < 0) return {false, -1, best.d2};
  if (mac.pick == PickRule::newest) {
    if (newest_under < 0) return {false, -1, best.d2};
    return {true, newest_under, best.d2};
  }
  return {best.d2 < threshold, best.d2 < threshold ? best.p : -1, best.d2};
}

// A decode session of one layer: per-request KV and rings, one step at a time.
class Session {
 public:
  struct Result {
    std::vector<double> out;              // [n, q_heads, head_dim]
    std::vector<HeadDecision> decisions;  // [n, q_heads]
    std::vector<GroupInfo> groups;        // [n, kv_heads]
    StepStats stats;
  };

  // `mac_enabled = false` gives plain full attention (no match, no ring).
  Session(const Problem& shape, const MacParams& mac, double rope_theta = kDefaultRopeTheta,
          bool mac_enabled = true)
      : shape_(shape), mac_(mac), theta_(rope_theta), mac_enabled_(mac_enabled) {
    require_valid(shape_);
    require_valid(mac_);
  }

  void set_forced(const ForcedHits& f) { forced_ = f; }

  int add_request() {
    Request r;
    r.kv.resize(static_cast<std::size_t>(shape_.kv_heads));
    r.rings.assign(static_cast<std::size_t>(shape_.q_heads),
                   std::vector<RingEntry>(static_cast<std::size_t>(mac_.ring_capacity)));
    requests_.push_back(std::move(r));
    return static_cast<int>(requests_.size()) - 1;
  }

  int length(int request) const { return at(request).len; }
  const KvHead& kv(int request, int kv_head) const {
    return at(request).kv.at(static_cast<std::size_t>(kv_head));
  }
  // The ring entry that holds position pos of (request, head); pos = -1 if none does.
  const RingEntry& ring_entry(int request, int head, int pos) const {
    const auto& ring = at(request).rings.at(static_cast<std::size_t>(head));
    return ring[static_cast<std::size_t>(ring_slot(pos, mac_.ring_capacity))];
  }

  // Appends a step's K/V without attending (tests fast-forward long contexts with it: positions
  // appended this way hold no ring entry, so nothing can match them). Counts as a step.
  void append(std::span<const int> requests, std::span<const float> k, std::span<const float> v) {
    const std::size_t per = static_cast<std::size_t>(shape_.kv_heads) * shape_.head_dim;
    MACTUNE_REQUIRE(k.size() == requests.size() * per && v.size() == k.size(),
                    "k and v must hold n x kv_heads x head_dim values");
    for (std::size_t b = 0; b < requests.size(); ++b) {
      Request& r = at(requests[b]);
      append_kv(r, r.len, k.subspan(b * per, per), v.subspan(b * per, per));
      ++r.len;
    }
    ++steps_;
  }

  // One decode step. q: [n, q_heads, D], k and v: [n, kv_heads, D], pre-RoPE, for requests[0..n).
  Result step(std::span<const int> requests, std::span<const float> q, std::span<const float> k,
              std::span<const float> v) {
    const int n = static_cast<int>(requests.size());
    const int Hq = shape_.q_heads, Hkv = shape_.kv_heads, D = shape_.head_dim;
    const std::size_t uD = static_cast<std::size_t>(D);
    MACTUNE_REQUIRE(q.size() == std::size_t(n) * Hq * uD, "q has ", q.size(), " values, expected ",
                    std::size_t(n) * Hq * uD);
    MACTUNE_REQUIRE(k.size() == std::size_t(n) * Hkv * uD && v.size() == k.size(),
                    "k and v must hold n x kv_heads x head_dim values");
    Result res;
    res.out.assign(std::size_t(n) * Hq * uD, 0.0);
    res.decisions.resize(std::size_t(n) * Hq);
    long long kv_before = 0;
    for (int b = 0; b < n; ++b) {
      Request& r = at(requests[b]);
      const int m = r.len;
      append_kv(r, m, k.subspan(std::size_t(b) * Hkv * uD, Hkv * uD),
                v.subspan(std::size_t(b) * Hkv * uD, Hkv * uD));
      HeadDecision* dec = &res.decisions[std::size_t(b) * Hq];
      step_request(r, m, b, n, kv_before, q.subspan(std::size_t(b) * Hq * uD, Hq * uD), dec,
                   &res.out[std::size_t(b) * Hq * uD], res.stats);
      account_request(shape_, mac_, m, dec, res.groups, res.stats, mac_enabled_);
      kv_before += m + 1;
      ++r.len;
    }
    ++steps_;
    return res;
  }

 private:
  struct Request {
    int len = 0;
    std::vector<KvHead> kv;                     // [kv_heads]
    std::vector<std::vector<RingEntry>> rings;  // [q_heads][K]
  };

  Request& at(int id) {
    MACTUNE_REQUIRE(id >= 0 && id < static_cast<int>(requests_.size()), "unknown request ", id);
    return requests_[static_cast<std::size_t>(id)];
  }
  const Request& at(int id) const {
    MACTUNE_REQUIRE(id >= 0 && id < static_cast<int>(requests_.size()), "unknown request ", id);
    return requests_[static_cast<std::size_t>(id)];
  }

  void append_kv(Request& r, int m, std::span<const float> k, std::span<const float> v) {
    const int D = shape_.head_dim;
    const RopeAngles ang = rope_angles(D, m, theta_);
    Vec kr(static_cast<std::size_t>(D));
    for (int g = 0; g < shape_.kv_heads; ++g) {
      apply_rope(&k[std::size_t(g) * D], kr.data(), D, ang);
      KvHead& kv = r.kv[static_cast<std::size_t>(g)];
      for (int i = 0; i < D; ++i) {
        kv.k.push_back(round_to(shape_.kv_dtype, kr[i]));
        kv.v.push_back(round_to(shape_.kv_dtype, v[std::size_t(g) * D + i]));
      }
    }
  }

  // Decisions of every head of batch row b (of n) at step m: match, then the forced override.
  // The acceptance gate is applied later, once the fresh part is attended.
  // kv_before: sum of kv_len over the batch rows before b (the skip-ratio quota's share).
  void decide(const Request& r, int m, int b, int n, long long kv_before,
              const std::vector<Vec>& q_ring, HeadDecision* dec) const {
    const int Hq = shape_.q_heads;
    const bool eligible = mac_enabled_ && m >= mac_.min_context;
    for (int h = 0; h < Hq; ++h) {
      HeadDecision& d = dec[h];
      d = HeadDecision{};
      if (!eligible) continue;
      d.eligible = true;
      const MatchResult mr = match(r.rings[std::size_t(h)], q_ring[std::size_t(h)], m, mac_);
      d.d2 = static_cast<float>(mr.d2);
      d.hit = mr.hit;
      d.p = mr.p;
      if (forced_.enabled) {
        const ForcedSite at{b, n, h, Hq, shape_.kv_heads, m, kv_before};
        const ForcedChoice c = forced_choice(forced_, steps_, at, mac_.ring_capacity, mac_.band);
        d.hit = c.hit && entry_valid(r, h, m - c.lag);
        d.p = d.hit ? m - c.lag : -1;
      }
      d.start = d.hit ? cache_end(d.p, mac_.band) : 0;
    }
    if (mac_.group_hits) demote_partial_groups(dec);
  }

  // group_hits (kernels/stats.h group_keeps_hits): a partial group's hits become plain misses.
  void demote_partial_groups(HeadDecision* dec) const {
    const int G = shape_.group_size();
    for (int g = 0; g < shape_.kv_heads; ++g) {
      const std::span<HeadDecision> group(dec + g * G, static_cast<std::size_t>(G));
      if (group_keeps_hits(group)) continue;
      for (HeadDecision& d : group)
        if (d.hit) demote_to_miss(d);
    }
  }

  bool entry_valid(const Request& r, int h, int p) const {
    const RingEntry& e =
        r.rings[std::size_t(h)][static_cast<std::size_t>(ring_slot(p, mac_.ring_capacity))];
    return e.pos == p && !e.summary.empty();
  }

  // Outputs and new ring entries of every head of one request at step m.
  void step_request(Request& r, int m, int b, int n, long long kv_before, std::span<const float> q,
                    HeadDecision* dec, double* out, StepStats& stats) {
    const int Hq = shape_.q_heads, G = shape_.group_size(), D = shape_.head_dim;
    const std::size_t uD = static_cast<std::size_t>(D);
    const int kv_len = m + 1, ce = cache_end(m, mac_.band);
    const double scale = shape_.scale();
    const RopeAngles ang = rope_angles(D, m, theta_);
    std::vector<Vec> q_ring(static_cast<std::size_t>(Hq), Vec(uD));
    std::vector<Vec> q_rot(static_cast<std::size_t>(Hq), Vec(uD));
    for (int h = 0; h < Hq; ++h) {
      const float* qh = &q[std::size_t(h) * uD];
      for (std::size_t i = 0; i < uD; ++i) q_ring[h][i] = round_to(shape_.kv_dtype, qh[i]);
      apply_rope(qh, q_rot[h].data(), D, ang);
    }
    decide(r, m, b, n, kv_before, q_ring, dec);
    if (mac_enabled_ && mac_.accept_eps < 1.0) {
      for (int h = 0; h < Hq; ++h) {  // acceptance gate on the reused mass
        HeadDecision& d = dec[h];
        if (!d.hit) continue;
        const State fresh =
            attend(q_rot[h].data(), r.kv[std::size_t(h / G)], D, d.start, kv_len, scale);
        const double alpha = 1.0 / (1.0 + std::exp(fresh.lse - ring_entry(r, h, d.p).summary.lse));
        if (!(alpha < mac_.accept_eps)) d = HeadDecision{true, false, true, -1, d.d2, 0};
      }
      if (mac_.group_hits) demote_partial_groups(dec);
    }
    std::vector<State> entries(static_cast<std::size_t>(Hq), State(D));
    for (int h = 0; h < Hq; ++h) {
      HeadDecision& d = dec[h];
      const KvHead& kv = r.kv[std::size_t(h / G)];
      const double* qh = q_rot[h].data();
      State result(D);
      if (!mac_enabled_) {
        result = attend(qh, kv, D, 0, kv_len, scale);
      } else {
        const State& reused = d.hit ? ring_entry(r, h, d.p).summary : State(D);
        if (mac_.rectify == Rectify::forward) {
          entries[h] = merge(reused, attend(qh, kv, D, d.start, ce, scale));
          result = merge(entries[h], attend(qh, kv, D, ce, kv_len, scale));
        } else {
          result = merge(reused, attend(qh, kv, D, d.start, kv_len, scale));
          if (ce > 0) {
            bool fired = false;
            entries[h] =
                remove(result, attend(qh, kv, D, ce, kv_len, scale), mac_.subtract_guard, &fired);
            stats.guard_fires += fired ? 1 : 0;
          }
        }
      }
      std::copy(result.o.begin(), result.o.end(), out + std::size_t(h) * uD);
    }
    if (!mac_enabled_) return;
    for (int h = 0; h < Hq; ++h) {  // ring writes last: slot m mod K may hold candidate m - K
      RingEntry& e = r.rings[std::size_t(h)][std::size_t(ring_slot(m, mac_.ring_capacity))];
      e.pos = m;
      e.q = q_ring[std::size_t(h)];
      e.summary = entries[std::size_t(h)];
      for (double& x : e.summary.o) x = round_to(mac_.summary_dtype, x);
      e.summary.lse = static_cast<float>(e.summary.lse);
    }
  }

  const RingEntry& ring_entry(const Request& r, int h, int p) const {
    return r.rings[std::size_t(h)][std::size_t(ring_slot(p, mac_.ring_capacity))];
  }

  Problem shape_;
  MacParams mac_;
  double theta_;
  bool mac_enabled_;
  ForcedHits forced_;
  std::uint64_t steps_ = 0;
  std::vector<Request> requests_;
};

}  // namespace mactune::ref
