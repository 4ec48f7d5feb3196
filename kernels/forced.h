// Forced hits: decisions with an exact hit quota per step, for benchmarking at a chosen hit
// rate. The real match scan still runs; its result is then overridden. Pure functions of
// (seed, step, unit), usable on host and device, so every backend forces the same decisions.
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

// Whether unit u (of `units`) hits at this step: an affine permutation of the units, drawn
// from (seed, step), ranks them; the first `quota` ranks hit. Exactly `quota` units hit.
MACTUNE_HD inline bool forced_unit_hits(const ForcedHits& f, std::uint64_t step, int u, int units) {
  const int quota = forced_quota(f.hit_rate, units);
  if (quota <= 0) return false;
  if (quota >= units) return true;
  const std::uint64_t h = detail::splitmix64(f.seed ^ detail::splitmix64(step));
  const std::uint64_t n = static_cast<std::uint64_t>(units);
  std::uint64_t a = 1 + (h % n);
  while (detail::gcd64(a, n) != 1) a = a % n + 1;
  const std::uint64_t b = (h >> 32) % n;
  const std::uint64_t rank = (a * static_cast<std::uint64_t>(u) + b) % n;
  return rank < static_cast<std::uint64_t>(quota);
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
