// cpu::Session: one decode step (DESIGN.md section 1), phase by phase.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "kernels/cpu/prune.h"
#include "kernels/cpu/session_impl.h"
#include "kernels/forced.h"
#include "kernels/plan_serial.h"
#include "kernels/rope.h"
#include "kernels/state.h"

namespace mactune::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::size_t sz(long long x) {
  return static_cast<std::size_t>(x);
}

}  // namespace

void Session::Impl::check_step(std::span<const int> requests, std::span<const float> q,
                               std::span<const float> k, std::span<const float> v) {
  const std::size_t n = requests.size();
  MACTUNE_REQUIRE(n >= 1 && n <= slots.size(), "a step takes 1..", slots.size(), " requests, got ",
                  n);
  MACTUNE_REQUIRE(q.size() == n * sz(Hq) * sz(D), "q has ", q.size(), " floats, expected n x ",
                  "q_heads x head_dim = ", n * sz(Hq) * sz(D));
  MACTUNE_REQUIRE(k.size() == n * sz(Hkv) * sz(D), "k has ", k.size(), " floats, expected n x ",
                  "kv_heads x head_dim = ", n * sz(Hkv) * sz(D));
  MACTUNE_REQUIRE(v.size() == k.size(), "v has ", v.size(), " floats, expected ", k.size());
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t c = 0; c < b; ++c)
      MACTUNE_REQUIRE(requests[c] != requests[b], "request ", requests[b],
                      " appears twice in one step");
  for (std::size_t b = 0; b < n; ++b) {
    const Request& r = request(requests[b]);
    MACTUNE_REQUIRE(r.len < opt.max_context, "request ", requests[b], ": position ", r.len,
                    " is past max_context = ", opt.max_context);
  }
}

void Session::Impl::step(std::span<const int> requests, std::span<const float> q,
                         std::span<const float> k, std::span<const float> v, float* out,
                         bool advance) {
  check_step(requests, q, k, v);
  PhaseScope whole(opt.phases, Phase::step, name);
  const int n = static_cast<int>(requests.size());
  ids.assign(requests.begin(), requests.end());
  m_of.resize(sz(n));
  kv_before.resize(sz(n));
  for (int b = 0; b < n; ++b) {
    m_of[sz(b)] = request(requests[sz(b)]).len;
    kv_before[sz(b)] = b == 0 ? 0 : kv_before[sz(b - 1)] + m_of[sz(b - 1)] + 1;
  }
  result.decisions.assign(sz(n) * sz(Hq), HeadDecision{});
  result.groups.clear();
  result.stats = StepStats{};

  rope_and_append(requests, q, k, v);
  match(requests);
  plan(n);
  attend();
  if (opt.mac_enabled && mac.accept_eps < 1.0) gate(requests);
  merge(requests, out);
  if (opt.mac_enabled) ring_write(requests);

  for (int b = 0; b < n; ++b)
    account_request(shape, mac, m_of[sz(b)], &result.decisions[sz(b) * sz(Hq)], result.groups,
                    result.stats, opt.mac_enabled);
  for (int& f : guard_fires) result.stats.guard_fires += std::exchange(f, 0);
  if (advance) {
    for (int b = 0; b < n; ++b) ++request(requests[sz(b)]).len;
    ++steps;
  }
}

// RoPE of q and k at each request's position, q rounded for the ring, KV stored at m.
void Session::Impl::rope_and_append(std::span<const int> requests, std::span<const float> q,
                                    std::span<const float> k, std::span<const float> v) {
  const int n = static_cast<int>(requests.size());
  q_rot.resize(sz(n) * sz(Hq) * sz(D));
  q_round.resize(q_rot.size());
  k_rot.resize(sz(n) * sz(Hkv) * sz(D));
  {
    PhaseScope ph(opt.phases, Phase::rope, name);
    for (int b = 0; b < n; ++b) {
      const double m = m_of[sz(b)];
      for (int i = 0; i < D / 2; ++i) {  // as rope_angles(D, m, theta), without its pow calls
        rope.cos[sz(i)] = std::cos(m * inv_freq[sz(i)]);
        rope.sin[sz(i)] = std::sin(m * inv_freq[sz(i)]);
      }
      for (int h = 0; h < Hq; ++h) {
        const std::size_t at = (sz(b) * sz(Hq) + sz(h)) * sz(D);
        float* rot = &q_rot[at];
        apply_rope(&q[at], rot, D, rope);
        for (int i = 0; i < D; ++i) {
          rot[i] *= q_scale;
          q_round[at + sz(i)] = static_cast<float>(round_to(shape.kv_dtype, q[at + sz(i)]));
        }
      }
      for (int g = 0; g < Hkv; ++g) {
        const std::size_t at = (sz(b) * sz(Hkv) + sz(g)) * sz(D);
        apply_rope(&k[at], &k_rot[at], D, rope);
      }
    }
  }
  PhaseScope ph(opt.phases, Phase::append, name);
  for (int b = 0; b < n; ++b) {
    Request& r = request(requests[sz(b)]);
    const int m = m_of[sz(b)];
    kv.reserve(r.pages, m + 1);
    for (int g = 0; g < Hkv; ++g) {
      const std::size_t at = (sz(b) * sz(Hkv) + sz(g)) * sz(D);
      kv.write(r.pages, g, m, &k_rot[at], &v[at]);
    }
  }
}

void Session::Impl::match(std::span<const int> requests) {
  const int n = static_cast<int>(requests.size());
  starts.assign(sz(n) * sz(Hq), 0);
  if (!opt.mac_enabled) return;
  bool any = false;
  for (int b = 0; b < n; ++b) any = any || m_of[sz(b)] >= mac.min_context;
  if (!any) return;
  PhaseScope ph(opt.phases, Phase::match, name);
  pool->run(n * Hq, [&](int task, int worker) {
    PhaseScope on_worker(worker_sink(worker), Phase::match, name);
    const int b = task / Hq, h = task % Hq;
    decide_head(request(requests[sz(b)]), b, n, h, worker);
  });
  for (long long& r : rows_read) result.stats.match_rows_read += std::exchange(r, 0);
  if (mac.group_hits) demote_partial_groups(n);
}

// group_hits, the rule of kernels/stats.h (as ref::Session::demote_partial_groups): after the
// match, before the plan (a demoted head starts at 0, so the group's span covers its whole prefix),
// and after the gate's rejections.
void Session::Impl::demote_partial_groups(int n) {
  for (int b = 0; b < n; ++b)
    for (int g = 0; g < Hkv; ++g) {
      HeadDecision* dec = &result.decisions[sz(b) * sz(Hq) + sz(g) * sz(G)];
      if (group_keeps_hits({dec, sz(G)})) continue;
      for (int j = 0; j < G; ++j)
        if (dec[j].hit) {
          demote_to_miss(dec[j]);
          starts[sz(b) * sz(Hq) + sz(g) * sz(G) + sz(j)] = 0;
        }
    }
}

// The decision of head h of batch row b (of n): the match over the ring, then the forced
// override, as ref::Session::decide. The acceptance gate comes later, in gate().
void Session::Impl::decide_head(const Request& r, int b, int n, int h, int worker) {
  const int m = m_of[sz(b)];
  HeadDecision& d = result.decisions[sz(b) * sz(Hq) + sz(h)];
  if (m < mac.min_context) return;
  d.eligible = true;
  const Ring& ring = r.ring;
  const int K = ring.capacity;
  const float* q = &q_round[(sz(b) * sz(Hq) + sz(h)) * sz(D)];
  if (pruned && mac.pick != PickRule::normalized) {
    match_pruned(ring, h, m, q, d, worker);
  } else {
    match_scan(ring, h, m, q, d, worker);
  }
  const ForcedHits& f = opt.forced;
  if (f.enabled) {
    const ForcedChoice c =
        forced_choice(f, steps, {b, n, h, Hq, Hkv, m, kv_before[sz(b)]}, K, mac.band);
    const int p = m - c.lag;
    bool valid = false;
    if (c.hit && p >= 0) {
      const std::size_t i = ring.index(h, ring_slot(p, K));
      valid = ring.pos[i] == p && ring.lse[i] > kNegInf;
    }
    d.hit = valid;
    d.p = d.hit ? p : -1;
  }
  d.start = d.hit ? cache_end(d.p, mac.band) : 0;
  starts[sz(b) * sz(Hq) + sz(h)] = d.start;
}

// The exhaustive scan: every candidate's d2 (dist2), older first so ties stay with the older.
void Session::Impl::match_scan(const Ring& ring, int h, int m, const float* q, HeadDecision& d,
                               int worker) {
  const int K = ring.capacity;
  if (mac.pick == PickRule::normalized) {
    float* y = &qn[sz(worker) * sz(D)];
    double n2 = 0.0;
    for (int i = 0; i < D; ++i) n2 += double(q[i]) * q[i];
    const float c = n2 > 0.0 ? static_cast<float>(std::sqrt(D / n2)) : 1.0f;
    for (int i = 0; i < D; ++i) y[i] = q[i] * c;
    q = y;
  }
  float* dist = &d2[sz(worker) * sz(K)];
  // Below m = K the candidates are positions 0..m-1, in slots 0..m-1: scan only those.
  kernels.dist2({q, ring.q_at(h, 0), std::min(m, K), mac.pick == PickRule::normalized, dist});
  rows_read[sz(worker)] += std::min(m, K);
  const double threshold = match_threshold(D, mac.tau);
  float best = std::numeric_limits<float>::infinity();
  int best_p = -1, newest_under = -1;
  for (int p = std::max(0, m - K); p < m; ++p) {  // older first: ties stay with the older
    const int slot = ring_slot(p, K);
    const std::size_t i = ring.index(h, slot);
    if (ring.pos[i] != p || !(ring.lse[i] > kNegInf)) continue;
    if (dist[slot] < best) best = dist[slot], best_p = p;
    if (static_cast<double>(dist[slot]) < threshold) newest_under = p;
  }
  d.d2 = best;
  if (mac.tau < 1.0 && best_p >= 0) {
    if (mac.pick == PickRule::newest) {
      d.hit = newest_under >= 0;
      d.p = newest_under;
    } else if (static_cast<double>(best) < threshold) {
      d.hit = true;
      d.p = best_p;
    }
  }
}

namespace {

// f(slot) for every slot of [lo, hi) whose byte in keep is set, in order: eight bytes a test
// (the bound keeps a few percent of the slots).
template <class F>
void for_kept(const std::uint8_t* keep, int lo, int hi, F&& f) {
  int s = lo;
  for (; s + 8 <= hi; s += 8) {
    std::uint64_t word;
    std::memcpy(&word, keep + s, sizeof word);
    if (word == 0) continue;
    for (int j = s; j < s + 8; ++j)
      if (keep[j]) f(j);
  }
  for (; s < hi; ++s)
    if (keep[s]) f(s);
}

}  // namespace

// The pruned match (prune.h): one pass over the 4-bit codes bounds every candidate's d2 from
// below; a row is read in full (dist2_some: the scan's value, bit for bit) only if its bound
// is under the threshold and, for pick nearest, not above the best d2 found so far. Nearest
// takes the survivors in order of their bounds and stops at the first bound above the best
// (a row with d2 equal to the best has its bound at or below it, so every tie is read and the
// older position wins as in the scan); newest takes them newest first and stops at the first
// d2 under the threshold (every newer candidate is over it: read, or bounded at or above it).
// d2 reported: the scan's value on a nearest hit; otherwise the smallest d2 read in full (+inf
// if none), not the exhaustive minimum.
void Session::Impl::match_pruned(const Ring& ring, int h, int m, const float* q, HeadDecision& d,
                                 int worker) {
  const int K = ring.capacity;
  const int n_slots = std::min(m, K);
  d.d2 = std::numeric_limits<float>::infinity();
  if (!(mac.tau < 1.0)) return;  // hits disabled: nothing to read
  std::int8_t* codes = &q_codes[sz(worker) * sz(D)];
  const prune::Query pq = prune::prepare(q, D, codes);
  const double threshold = match_threshold(D, mac.tau);
  std::vector<Candidate>& cand = candidates[sz(worker)];
  cand.clear();
  // The bound runs over the slots in memory order; the survivors are then taken older first:
  // the window's positions oldest .. m - 1 sit in slots ring_slot(oldest) .. n_slots - 1 and
  // then 0 .. ring_slot(oldest) - 1. A slot's liveness (it holds the window's position for
  // it) is looked up for the few the bound keeps.
  const std::size_t i0 = ring.index(h, 0);
  const int oldest = std::max(0, m - K);
  const int first = ring_slot(oldest, K) % n_slots;
  auto keep = [&](int slot, double lb) {
    const int p = ring.pos[i0 + sz(slot)];
    if (p < oldest || p >= m || ring_slot(p, K) != slot || !(ring.lse[i0 + sz(slot)] > kNegInf))
      return;
    cand.push_back({slot, p, lb});
  };
  if (pq.finite) {
    std::int32_t* dot = &dots[sz(worker) * sz(K)];
    std::uint8_t* kept = &keeps[sz(worker) * sz(K)];
    const float* scale = &ring.sk_scale[i0];
    const float* c2 = &ring.sk_c2[i0];
    const float* norm = &ring.sk_norm[i0];
    const float* err = &ring.sk_err[i0];
    kernels.sketch_dot({codes, ring.codes_at(h, 0), n_slots, dot, &pq,
                        prune::root_for(pq, threshold), scale, c2, norm, err, kept});
    auto survivor = [&](int slot) {
      const double elo = prune::e_lo(pq, dot[slot], scale[slot], c2[slot], norm[slot]);
      keep(slot, prune::lower_bound(pq, elo, err[slot]));
    };
    for_kept(kept, first, n_slots, survivor);  // the rest: the bound shows d2 >= threshold
    for_kept(kept, 0, first, survivor);
  } else {
    for (int k = 0; k < n_slots; ++k)  // no bound: every row is read
      keep(first + k < n_slots ? first + k : first + k - n_slots, 0.0);
  }
  if (cand.empty()) return;
  int& one = pick_slot[sz(worker)];
  // The rows are read in the order below, one at a time (each read may end the search): the
  // row kAhead places on is fetched into the cache meanwhile, so the reads' misses overlap.
  constexpr int kAhead = 4;
  const auto* rows = reinterpret_cast<const char*>(ring.q_at(h, 0));
  auto fetch = [&](int i) {
    if (i < 0 || i >= static_cast<int>(cand.size())) return;
    const char* row = rows + sz(cand[sz(i)].slot) * ring.q_bytes;
    for (std::size_t b = 0; b < ring.q_bytes; b += 64) __builtin_prefetch(row + b, 0, 3);
  };
  float* q_kernel = &q_perm[sz(worker) * sz(D)];
  bool q_ready = false;  // q_kernel holds q in dist2_some's lane order after the first read
  auto exact = [&](const Candidate& c) {
    one = c.slot;
    float x = 0.0f;
    kernels.dist2_some({q, ring.q_at(h, 0), n_slots, &one, 1, &x, q_kernel, q_ready});
    q_ready = true;
    ++rows_read[sz(worker)];
    d.d2 = std::min(d.d2, x);
    return x;
  };
  const int n_cand = static_cast<int>(cand.size());
  if (mac.pick == PickRule::newest) {
    for (int i = n_cand - 1; i > n_cand - 1 - kAhead; --i) fetch(i);
    for (int i = n_cand - 1; i >= 0; --i) {
      fetch(i - kAhead);
      if (static_cast<double>(exact(cand[sz(i)])) < threshold) {
        d.hit = true;
        d.p = cand[sz(i)].p;
        return;
      }
    }
    return;
  }
  // Equal bounds: the older first (either order would do: ties are settled below).
  std::sort(cand.begin(), cand.end(), [](const Candidate& a, const Candidate& b) {
    return a.lb < b.lb || (a.lb == b.lb && a.p < b.p);
  });
  float best = std::numeric_limits<float>::infinity();
  int best_p = -1;
  for (int i = 0; i < kAhead; ++i) fetch(i);
  for (int i = 0; i < n_cand; ++i) {
    const Candidate& c = cand[sz(i)];
    if (c.lb > static_cast<double>(best)) break;  // this and every later one: d2 > best
    fetch(i + kAhead);
    const float x = exact(c);
    if (x < best || (x == best && c.p < best_p)) best = x, best_p = c.p;
  }
  if (best_p >= 0 && static_cast<double>(best) < threshold) {
    d.hit = true;
    d.p = best_p;
    d.d2 = best;
  }
}

// One span per (request, KV head) from the heads' starts; chunks never straddle cache_end(m).
void Session::Impl::plan(int n) {
  PhaseScope ph(opt.phases, Phase::plan, name);
  spans.resize(sz(n) * sz(Hkv));
  for (int b = 0; b < n; ++b)
    for (int g = 0; g < Hkv; ++g) {
      GroupSpan& s = spans[sz(b) * sz(Hkv) + sz(g)];
      const int m = m_of[sz(b)];
      s.batch_index = b;
      s.kv_head = g;
      s.kv_len = m + 1;
      s.begin = *std::min_element(&starts[sz(b) * sz(Hq) + sz(g * G)],
                                  &starts[sz(b) * sz(Hq) + sz(g * G + G)]);
      // Full attention needs no ring snapshot: one segment from 0.
      s.cache_end = opt.mac_enabled ? std::max(cache_end(m, mac.band), s.begin) : s.begin;
    }
  // The planner and its policy (kernels/plan.h): parts claimed dynamically by the pool.
  const PlanLimits limits = cpu_plan_limits(pool->size(), opt.engine.chunk_tokens);
  plan_arrays.resize(
      static_cast<std::size_t>(plan_capacity(static_cast<int>(spans.size()), limits)));
  merge_plan.resize(spans.size());
  dispatch.resize(plan_arrays.size());
  const PlanChoice c =
      plan_step(spans.data(), static_cast<int>(spans.size()), limits, plan_arrays.data(),
                merge_plan.data(), dispatch.data(), static_cast<std::int32_t>(plan_arrays.size()));
  MACTUNE_CHECK(c.items >= 0, "the plan overflowed its ", plan_arrays.size(), " items");
  items.assign(plan_arrays.begin(), plan_arrays.begin() + c.items);
  dispatch.resize(static_cast<std::size_t>(c.entries));
  // The acceptance gate re-attends rejected prefixes in pieces of the plan's size.
  chunk = opt.engine.chunk_tokens;
  for (const WorkItem& w : items) chunk = std::max(chunk, w.kv_end - w.kv_begin);
}

void Session::Impl::attend() {
  PhaseScope ph(opt.phases, Phase::attend, name);
  part_o.resize(items.size() * sz(G) * sz(D));
  part_lse.resize(items.size() * sz(G));
  pool->run(static_cast<int>(dispatch.size()), [&](int e, int worker) {
    PhaseScope on_worker(worker_sink(worker), Phase::attend, name);
    for (int i = dispatch[sz(e)].first; i < dispatch[sz(e)].last; ++i) attend_item(i);
  });
}

void Session::Impl::attend_item(int i) {
  const WorkItem& it = items[sz(i)];
  const std::size_t head0 = sz(it.batch_index) * sz(Hq) + sz(it.kv_head) * sz(G);
  AttendArgs a;
  a.q = &q_rot[head0 * sz(D)];
  a.start = &starts[head0];
  a.nh = G;
  a.kv = kv.view(slots[sz(ids[sz(it.batch_index)])].pages, it.kv_head);
  a.lo = it.kv_begin;
  a.hi = it.kv_end;
  a.block_rows = opt.engine.block_rows;
  a.o = &part_o[sz(i) * sz(G) * sz(D)];
  a.lse = &part_lse[sz(i) * sz(G)];
  kernels.attend(a);
}

}  // namespace mactune::cpu
