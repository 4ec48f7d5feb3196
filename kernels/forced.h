// Forced hits: decisions with an exact quota per step, for benchmarking at a chosen hit rate
// or at a chosen KV skip ratio. The real match scan still runs; its result is then overridden.
// Pure functions of (seed, step, unit), usable on host and device, so every backend forces
// the same decisions.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/config.h"
#include "kernels/enum_names.h"
#include "kernels/error.h"
#include "kernels/fields.h"

namespace mactune {

enum class Coherence : std::uint8_t {
  per_head,   // units are query heads: each head hits independently of its group
  per_group,  // units are (request, KV head) groups: all G heads of a unit hit together
};
enum class LagKind : std::uint8_t { fixed, uniform, normal };
// What the quota fixes per step.
//   hit_rate:   round(hit_rate x units) units hit, each at a lag drawn from `lag`.
//   skip_ratio: each request's (request, KV head) groups skip exactly their share of
//               round(skip_ratio x sum of kv_len over the step's groups) KV tokens: the hit
//               groups and their lags are solved for (forced_skip_choice below); `hit_rate`,
//               `lag` and `coherence` are not used (every head of a hit group hits).
enum class ForcedQuota : std::uint8_t { hit_rate, skip_ratio };

// lag = m - p of a forced hit: fixed a; uniform integer in [a, b]; normal(mean a, sd b).
// Always clipped to the valid range [1, min(K, m - r)] (p must hold a non-empty summary).
struct LagDistribution {
  LagKind kind = LagKind::uniform;
  double a = 1, b = 64;
  bool operator==(const LagDistribution&) const = default;
};

struct ForcedHits {
  bool enabled = false;
  double hit_rate = 1.0;  // exact quota: round(hit_rate x eligible units) units hit per step
  Coherence coherence = Coherence::per_head;
  LagDistribution lag;
  ForcedQuota quota = ForcedQuota::hit_rate;
  double skip_ratio = 0;  // quota skip_ratio: 1 - KV tokens read / sum of kv_len, exact per step
  std::uint64_t seed = 0x6d6163;
};

template <>
struct EnumNames<Coherence> {
  static constexpr std::string_view what = "coherence";
  static constexpr EnumName<Coherence> names[] = {{Coherence::per_head, "per-head"},
                                                  {Coherence::per_group, "per-group"},
                                                  {Coherence::per_head, "head"},
                                                  {Coherence::per_group, "group"}};
};
template <>
struct EnumNames<ForcedQuota> {
  static constexpr std::string_view what = "forced quota";
  static constexpr EnumName<ForcedQuota> names[] = {{ForcedQuota::hit_rate, "hit-rate"},
                                                    {ForcedQuota::skip_ratio, "skip-ratio"}};
};
template <>
struct EnumNames<LagKind> {
  static constexpr std::string_view what = "lag distribution";
  static constexpr EnumName<LagKind> names[] = {
      {LagKind::fixed, "fixed"}, {LagKind::uniform, "uniform"}, {LagKind::normal, "normal"}};
};

}  // namespace mactune

// Lag distributions as written in specs and flags: "fixed(8)", "uniform(1,64)", "normal(32,8)"
// (mean, sd); "1:64" is short for uniform(1,64).
template <>
struct mactune::FieldCodec<mactune::LagDistribution> {
  static std::string text(const LagDistribution& lag);
  static LagDistribution parse(std::string_view text);
};

// The forced-hit settings a workload sweeps. `enabled` and `seed` are not settings: the tuner
// always forces hits, with the spec's seed.
template <>
struct mactune::FieldTable<mactune::ForcedHits> {
  static const std::vector<Field<ForcedHits>>& fields() {
    using F = ForcedHits;
    static const std::vector<Field<F>> t = {
        field<&F::lag>("lag", "lag",
                       "distance m - p of a hit: fixed(a), uniform(a,b), normal(mean,sd)"),
        field<&F::coherence>("coherence", "coherence", "hit units: per-head or per-group"),
        field<&F::hit_rate>("hit_rate", "hit_rate",
                            "fraction of eligible units that hit (exact quota per step)")
            .range(0, 1),
        // Not a spec axis: a spec's `skip_ratio` key sets it (tuner/spec/axes.cpp).
        field<&F::quota>("quota", "quota", "what the quota fixes: hit-rate or skip-ratio"),
        field<&F::skip_ratio>("skip_ratio", "skip_ratio",
                              "KV skip ratio of each step, exact to the token (quota skip-ratio)")
            .range(0, 1),
    };
    return t;
  }
};

namespace mactune {

namespace detail {

MACTUNE_HD inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
MACTUNE_HD inline std::uint64_t gcd64(std::uint64_t a, std::uint64_t b) {
  while (b != 0) {
    const std::uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}
MACTUNE_HD inline double unit_uniform(std::uint64_t h) {  // in (0, 1)
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace detail

// Number of units that hit among `units` eligible ones.
MACTUNE_HD inline int forced_quota(double hit_rate, int units) {
  const double q = hit_rate * units;
  const int n = static_cast<int>(q + 0.5);
  return n < 0 ? 0 : (n > units ? units : n);
}

// Rank of unit u among `units` under an affine permutation of the units drawn from `key`
// (a function of the seed and the step): a bijection of [0, units).
MACTUNE_HD inline int forced_rank(std::uint64_t key, int u, int units) {
  const std::uint64_t h = detail::splitmix64(key);
  const std::uint64_t n = static_cast<std::uint64_t>(units);
  std::uint64_t a = 1 + (h % n);
  while (detail::gcd64(a, n) != 1) a = a % n + 1;
  const std::uint64_t b = (h >> 32) % n;
  return static_cast<int>((a * static_cast<std::uint64_t>(u) + b) % n);
}

// Whether unit u (of `units`) hits at this step: the permutation drawn from (seed, step)
// ranks the units; the first `quota` ranks hit. Exactly `quota` units hit.
MACTUNE_HD inline bool forced_unit_hits(const ForcedHits& f, std::uint64_t step, int u, int units) {
  const int quota = forced_quota(f.hit_rate, units);
  if (quota <= 0) return false;
  if (quota >= units) return true;
  return forced_rank(f.seed ^ detail::splitmix64(step), u, units) < quota;
}

// Lag of a forced hit for unit u, clipped to [1, max_lag]; 0 when max_lag < 1 (no valid p).
MACTUNE_HD inline int forced_lag(const ForcedHits& f, std::uint64_t step, int u, int max_lag) {
  if (max_lag < 1) return 0;
  const std::uint64_t h1 =
      detail::splitmix64(f.seed + 0x51ed270b27a5ull * (step + 1) + static_cast<std::uint64_t>(u));
  double lag = f.lag.a;
  if (f.lag.kind == LagKind::uniform) {
    const double lo = f.lag.a, hi = f.lag.b < f.lag.a ? f.lag.a : f.lag.b;
    lag = lo + std::floor(detail::unit_uniform(h1) * (hi - lo + 1.0));
  } else if (f.lag.kind == LagKind::normal) {
    const std::uint64_t h2 = detail::splitmix64(h1);
    const double r = std::sqrt(-2.0 * std::log(detail::unit_uniform(h1)));
    lag =
        std::round(f.lag.a + f.lag.b * r * std::cos(6.283185307179586 * detail::unit_uniform(h2)));
  }
  const int l = static_cast<int>(lag);
  return l < 1 ? 1 : (l > max_lag ? max_lag : l);
}

// Largest valid lag at step m: p = m - lag must be in [m - K, m) and hold a non-empty summary
// (p >= r, so that cache_end(p) > 0).
MACTUNE_HD inline int forced_max_lag(int m, int ring_capacity, int band) {
  const int by_ring = ring_capacity;
  const int by_summary = m - band;
  return by_ring < by_summary ? by_ring : by_summary;
}

// ---- Skip-ratio quota (ForcedQuota::skip_ratio).
//
// The units are the (request, KV head) groups of one request: U = kv_heads units of one kv_len
// (= m + 1). A hit group reads `read` = lag + band tokens (kernels/stats.h: kv_len -
// cache_end(p) with p = m - lag >= band), so it skips kv_len - read, between s_min = kv_len -
// band - max_lag and s_max = kv_len - band - 1 tokens; a missing group skips none. To skip S
// tokens exactly, n hit groups need n s_min <= S <= n s_max. The smallest such n is
// ceil(S / s_max) (a larger n only raises n s_min), so S is reachable iff that n is at most U
// and n s_min <= S. The hits are the first n ranks of a permutation of the groups; they read
// R = n kv_len - S tokens in all, R / n each, the first R mod n ranks one more.
//
// Each request solves for its own share of the step's budget: with T_b the tokens of the
// groups of the requests before b, request b skips round(s (T_b + U kv_len)) - round(s T_b),
// so the shares add up to round(s x sum of kv_len) over the step whatever the requests'
// lengths, and every request skips within one token of s of its own KV. The work of a request
// does not depend on the batch it runs in (up to that token).

// The hit groups of a pool of `units` groups of one kv_len that skips `skipped` tokens: the
// first `hits` ranks hit and read `base_read` tokens each, the first `extra` ranks one more.
struct SkipSolution {
  bool reachable = false;
  int hits = 0;
  int base_read = 0;
  int extra = 0;
};

MACTUNE_HD inline SkipSolution forced_skip_solve(long long skipped, int units, int kv_len, int band,
                                                 int max_lag) {
  SkipSolution s;
  if (skipped == 0) {
    s.reachable = true;
    return s;
  }
  const long long s_max = static_cast<long long>(kv_len) - band - 1;
  const long long s_min = static_cast<long long>(kv_len) - band - max_lag;
  if (skipped < 0 || max_lag < 1 || s_max < 1) return s;
  const long long n = (skipped + s_max - 1) / s_max;
  if (n > units || n * s_min > skipped) return s;
  const long long read = n * kv_len - skipped;
  s.reachable = true;
  s.hits = static_cast<int>(n);
  s.base_read = static_cast<int>(read / n);
  s.extra = static_cast<int>(read % n);
  return s;
}

// round(s x tokens), as every backend computes it (tokens < 2^53).
MACTUNE_HD inline long long forced_skip_round(double skip_ratio, long long tokens) {
  return static_cast<long long>(std::floor(skip_ratio * static_cast<double>(tokens) + 0.5));
}

// The tokens request b must skip: its share of the step's budget. kv_before = sum of kv_len
// over the requests before it in the step; each request has kv_heads groups of kv_len.
MACTUNE_HD inline long long forced_skip_budget(double skip_ratio, long long kv_before, int kv_len,
                                               int kv_heads) {
  const long long before = kv_before * kv_heads;
  return forced_skip_round(skip_ratio, before + static_cast<long long>(kv_len) * kv_heads) -
         forced_skip_round(skip_ratio, before);
}

// The solution for request row b at step m (kv_len = m + 1).
MACTUNE_HD inline SkipSolution forced_skip_request(const ForcedHits& f, int m, long long kv_before,
                                                   int kv_heads, int ring_capacity, int band) {
  const long long skipped = forced_skip_budget(f.skip_ratio, kv_before, m + 1, kv_heads);
  return forced_skip_solve(skipped, kv_heads, m + 1, band, forced_max_lag(m, ring_capacity, band));
}

// What the forced override decides for one query head: hit or not, and the lag m - p (0: no
// hit). The engine then hits only where the ring holds position m - lag.
struct ForcedChoice {
  bool hit = false;
  int lag = 0;
};

// Where a head sits in its step: batch row `row` of `rows`, head h, at position m; kv_before =
// sum of kv_len (m + 1) over the rows before it (used by the skip-ratio quota only).
struct ForcedSite {
  int row = 0, rows = 1, head = 0;
  int q_heads = 1, kv_heads = 1;
  int m = 0;
  long long kv_before = 0;
};

// The forced decision of one head: the one function the reference, the CPU engine, the CUDA
// planner and the cost model's features all call.
MACTUNE_HD inline ForcedChoice forced_choice(const ForcedHits& f, std::uint64_t step,
                                             const ForcedSite& at, int ring_capacity, int band) {
  ForcedChoice c;
  const int G = at.q_heads / at.kv_heads;
  if (f.quota == ForcedQuota::skip_ratio) {
    const SkipSolution s =
        forced_skip_request(f, at.m, at.kv_before, at.kv_heads, ring_capacity, band);
    if (!s.reachable || s.hits == 0) return c;  // unreachable: every group reads all its KV
    const std::uint64_t key =
        f.seed ^ detail::splitmix64(step ^ (0xa0761d6478bd642full * (at.row + 1ull)));
    const int rank = forced_rank(key, at.head / G, at.kv_heads);
    if (rank >= s.hits) return c;
    c.hit = true;
    c.lag = s.base_read + (rank < s.extra ? 1 : 0) - band;
    return c;
  }
  const bool per_head = f.coherence == Coherence::per_head;
  const int unit = per_head ? at.row * at.q_heads + at.head : at.row * at.kv_heads + at.head / G;
  const int units = at.rows * (per_head ? at.q_heads : at.kv_heads);
  c.lag = forced_lag(f, step, unit, forced_max_lag(at.m, ring_capacity, band));
  c.hit = c.lag > 0 && forced_unit_hits(f, step, unit, units);
  if (!c.hit) c.lag = 0;
  return c;
}

}  // namespace mactune

// ---- Definitions.

inline std::string mactune::FieldCodec<mactune::LagDistribution>::text(const LagDistribution& lag) {
  const std::string a = format_real(lag.a), b = format_real(lag.b);
  return std::string(name_of(lag.kind)) + "(" + a + (lag.kind == LagKind::fixed ? "" : "," + b) +
         ")";
}

inline mactune::LagDistribution mactune::FieldCodec<mactune::LagDistribution>::parse(
    std::string_view text) {
  auto bad = [&]() -> LagDistribution {
    input_error("bad lag '", text, "' (expected fixed(a), uniform(a,b) or normal(mean,sd))");
  };
  std::string_view kind = "uniform", args = text;
  if (const auto open = text.find('('); open != std::string_view::npos) {
    if (text.back() != ')') return bad();
    kind = text.substr(0, open);
    args = text.substr(open + 1, text.size() - open - 2);
  } else if (text.find(':') == std::string_view::npos) {
    return bad();
  }
  std::vector<double> v;
  for (std::size_t start = 0; start <= args.size();) {
    std::size_t end = args.find_first_of(",:", start);
    if (end == std::string_view::npos) end = args.size();
    std::string_view part = args.substr(start, end - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    const auto x = parse_real(part);
    if (!x) return bad();
    v.push_back(*x);
    start = end + 1;
  }
  LagDistribution lag;
  if (kind == "fixed" && v.size() == 1 && v[0] >= 1)
    lag = {LagKind::fixed, v[0], v[0]};
  else if (kind == "uniform" && v.size() == 2 && v[0] >= 1 && v[1] >= v[0])
    lag = {LagKind::uniform, v[0], v[1]};
  else if (kind == "normal" && v.size() == 2 && v[0] >= 1 && v[1] >= 0)
    lag = {LagKind::normal, v[0], v[1]};
  else
    return bad();
  return lag;
}
