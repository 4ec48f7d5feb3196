#include "tuner/decide/decide.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {

std::string Config::id() const {
  return instance + "|" + launch_text(launch) + "|" + (mac ? fields_text(*mac) : "");
}

Config config_of(const TunePoint& p, const std::string& instance, Family family) {
  MACTUNE_CHECK(family == Family::mac || family == Family::full, "config_of: a ", name_of(family),
                " side is no side of a grid point");
  Config c{instance, p.launch(), std::nullopt};
  if (family == Family::mac) c.mac = p.mac;
  return c;
}

Verdict interval_verdict(const TimeStats& a, const TimeStats& b) {
  if (a.q3_s < b.q1_s) return Verdict::faster;
  if (a.q1_s > b.q3_s) return Verdict::slower;
  return Verdict::tie;
}

namespace {

// Simplicity order, the last word among tied configs: smaller ring first (less memory), then
// launch parameters in grid order with 0 ("auto", the default) first and then smaller values
// (fewer threads, smaller tiles), then the instance name and the other MAC settings in table
// order, so the order is total and deterministic.
struct Simplicity {
  using Key = std::vector<std::pair<double, std::string>>;  // numbers, or names (0 beside them)
  int K = 0, r = 0;
  Key launch;
  std::string instance;
  Key settings;

  static std::pair<double, std::string> key_of(const Scalar& v, bool zero_first) {
    const std::optional<double> x = number_of(v);
    if (!x) return {0.0, scalar_text(v)};
    return {zero_first && *x == 0 ? -1.0 : *x, ""};
  }
  static Simplicity of(const Config& c) {
    Simplicity s;
    for (const auto& [name, v] : c.launch) s.launch.push_back(key_of(v, true));
    s.instance = c.instance;
    if (c.mac) {
      s.K = c.mac->ring_capacity;
      s.r = c.mac->band;
      for (const Field<MacParams>& f : fields_of<MacParams>())
        s.settings.push_back(key_of(f.get(*c.mac), false));
    }
    return s;
  }
  auto operator<=>(const Simplicity&) const = default;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, 0.5);
}

// Picks among scored candidates: the tie set is every config whose tie_score is within the
// tolerance of the lowest; in it the incumbent wins, then the simplest config.
Choice choose(std::vector<Choice> cands, double tol, const std::optional<Config>& incumbent) {
  if (cands.empty()) return {};
  std::sort(cands.begin(), cands.end(), [](const Choice& a, const Choice& b) {
    if (a.score != b.score) return a.score < b.score;
    return Simplicity::of(a.config) < Simplicity::of(b.config);
  });
  double best = cands.front().tie_score;
  for (const Choice& c : cands) best = std::min(best, c.tie_score);
  std::vector<Choice> tied;  // fastest first
  for (const Choice& c : cands)
    if (c.tie_score <= best * (1.0 + tol)) tied.push_back(c);
  Choice chosen = tied.front();
  chosen.reason = cands.size() == 1 ? "only" : "fastest";
  if (tied.size() > 1) {
    const auto inc = std::find_if(tied.begin(), tied.end(),
                                  [&](const Choice& c) { return c.config == incumbent; });
    if (inc != tied.end()) {
      if (inc != tied.begin()) chosen = *inc, chosen.reason = "incumbent";
    } else {
      const auto simplest = std::min_element(tied.begin(), tied.end(), [](auto& a, auto& b) {
        return Simplicity::of(a.config) < Simplicity::of(b.config);
      });
      if (simplest != tied.begin()) chosen = *simplest, chosen.reason = "simpler";
    }
  }
  chosen.ties = {chosen.config};
  chosen.tie_scores = {chosen.score};
  for (const Choice& c : tied)
    if (c.config != chosen.config) {
      chosen.ties.push_back(c.config);
      chosen.tie_scores.push_back(c.score);
    }
  chosen.margin = 0;
  for (const Choice& c : cands)
    if (c.tie_score > best * (1.0 + tol)) {
      chosen.margin = c.score / chosen.score - 1.0;
      break;
    }
  return chosen;
}

// Whether interval a lies clearly above interval b (a is slower beyond the noise).
bool clearly_above(const TimeStats& a, const TimeStats& b) {
  return interval_verdict(a, b) == Verdict::slower;
}

}  // namespace

BreakEven break_even_of(std::vector<CurvePoint> curve) {
  std::sort(curve.begin(), curve.end(),
            [](const CurvePoint& a, const CurvePoint& b) { return a.hit_rate < b.hit_rate; });
  BreakEven be;
  be.curve = curve;
  std::size_t first_win = curve.size();
  while (first_win > 0 && curve[first_win - 1].verdict == Verdict::faster) --first_win;
  if (first_win < curve.size()) {
    be.status = BreakEvenStatus::ok;
    be.hit_rate = curve[first_win].hit_rate;
    be.lo = first_win > 0 ? curve[first_win - 1].hit_rate : 0.0;
    be.lo_closed = first_win == 0 || curve[first_win - 1].verdict == Verdict::tie;
  } else {
    const bool any_tie = std::any_of(curve.begin(), curve.end(),
                                     [](const CurvePoint& p) { return p.verdict == Verdict::tie; });
    be.status = any_tie || curve.empty() ? BreakEvenStatus::ambiguous : BreakEvenStatus::never;
  }
  return be;
}

std::string bracket_text(const BreakEven& be) {
  if (!be.hit_rate) return "";
  const double lo = be.lo.value_or(*be.hit_rate);
  return (be.lo_closed ? "[" : "(") + format_number(lo) + ", " + format_number(*be.hit_rate) + "]";
}

std::string break_even_text(const BreakEven& be) {
  if (!be.hit_rate) return std::string(name_of(be.status));
  std::string t = format_number(*be.hit_rate);
  if (be.lo && *be.lo < *be.hit_rate) t += " " + bracket_text(be);
  return t;
}

std::vector<BreakEvenAxis> break_even_axes(const BucketDecision& d) {
  std::vector<BreakEvenAxis> axes;
  if (!d.break_even.curve.empty() || d.skip_curve.empty()) axes.push_back(BreakEvenAxis::hit_rate);
  if (!d.skip_curve.empty()) axes.push_back(BreakEvenAxis::skip_ratio);
  return axes;
}

const BreakEven& break_even_on(const BucketDecision& d, BreakEvenAxis axis) {
  return axis == BreakEvenAxis::skip_ratio ? d.skip_break_even : d.break_even;
}

std::vector<BucketDecision> decide(const std::vector<PairRow>& rows, const DecideOptions& opt) {
  std::map<Bucket, std::vector<const PairRow*>> by_bucket;
  for (const PairRow& r : rows) by_bucket[r.bucket].push_back(&r);
  std::vector<BucketDecision> out;
  for (const auto& [bucket, list] : by_bucket) {
    BucketDecision d;
    d.bucket = bucket;
    const std::string bk = bucket.key();
    auto incumbent = [&](const char* fam) -> std::optional<Config> {
      const auto it = opt.incumbents.find(bk + "/" + fam);
      if (it == opt.incumbents.end()) return std::nullopt;
      return it->second;
    };

    // Full baseline: every pair measured it; a config's median, q1 and q3 are the medians of
    // its pairs' (robust to one pair measured during a burst of load).
    struct Agg {
      Choice c;
      std::vector<double> med, q1, q3;
    };
    std::map<std::string, Agg> full;
    for (const PairRow* r : list) {
      if (r->full_partial) continue;
      Choice c;
      c.config = r->full_config;
      Agg& a = full[c.config.id()];
      a.c = c;
      a.med.push_back(r->full.median_s);
      a.q1.push_back(r->full.q1_s);
      a.q3.push_back(r->full.q3_s);
    }
    std::vector<std::pair<Choice, TimeStats>> full_sum;
    for (auto& [id, a] : full) {
      TimeStats s;
      s.median_s = median_of(a.med);
      s.q1_s = median_of(a.q1);
      s.q3_s = median_of(a.q3);
      a.c.score = a.c.tie_score = s.median_s;
      full_sum.emplace_back(a.c, s);
    }
    // (Every full side partial: no candidates, and min_element is only read inside the loop.)
    const auto fastest_full =
        std::min_element(full_sum.begin(), full_sum.end(),
                         [](auto& a, auto& b) { return a.second.median_s < b.second.median_s; });
    std::vector<Choice> full_cands;
    for (auto& [c, s] : full_sum) {
      if (opt.ties == TieRule::overlap && !clearly_above(s, fastest_full->second))
        c.tie_score = fastest_full->second.median_s;
      full_cands.push_back(c);
    }
    d.full = choose(full_cands, opt.tie_tolerance, incumbent("full"));
    d.full_candidates = full_cands;

    // MAC: each config scored by the geometric mean, over the conditions every config was
    // measured at (hit rate x variant: the grid's, not the break-even search's probes, which
    // only the chosen config has), of its time over the best time at that condition.
    std::map<std::pair<double, std::string>, std::set<std::string>> configs_at;
    std::set<std::string> configs;
    for (const PairRow* r : list) {
      if (r->mac_partial) continue;  // a config a halving search dropped does not count
      const std::string id = r->mac_config.id();
      configs_at[{r->hit_rate, r->variant}].insert(id);
      configs.insert(id);
    }
    bool any_common = false;
    for (const auto& [cond, ids] : configs_at)
      any_common = any_common || ids.size() == configs.size();
    auto scored = [&](const PairRow* r) {
      return !any_common || configs_at[{r->hit_rate, r->variant}].size() == configs.size();
    };
    std::map<std::pair<double, std::string>, const TimeStats*> best_at;
    for (const PairRow* r : list) {
      if (r->mac_partial || !scored(r)) continue;
      auto [it, fresh] = best_at.try_emplace({r->hit_rate, r->variant}, &r->mac);
      if (!fresh && r->mac.median_s < it->second->median_s) it->second = &r->mac;
    }
    struct Logs {
      Choice c;
      double raw = 0, tie = 0;
      int n = 0;
    };
    std::map<std::string, Logs> mac;
    for (const PairRow* r : list) {
      if (r->mac_partial || !scored(r)) continue;
      Choice c;
      c.config = r->mac_config;
      Logs& l = mac[c.config.id()];
      l.c = c;
      const TimeStats& best = *best_at[{r->hit_rate, r->variant}];
      const double x = best.median_s > 0 ? std::log(r->mac.median_s / best.median_s) : 0.0;
      l.raw += x;
      l.tie += opt.ties == TieRule::overlap && !clearly_above(r->mac, best) ? 0.0 : x;
      ++l.n;
    }
    std::vector<Choice> mac_cands;
    for (auto& [id, l] : mac) {
      l.c.score = std::exp(l.raw / l.n);
      l.c.tie_score = std::exp(l.tie / l.n);
      mac_cands.push_back(l.c);
    }
    d.mac = choose(mac_cands, opt.tie_tolerance, incumbent("mac"));
    d.mac_candidates = mac_cands;

    // Break-even of the chosen MAC config against the chosen full config, per variant: below
    // it the table runs that full config, so that is what MAC must beat. Both were measured
    // interleaved at each grid condition (one group), so each point is a ratio from one run. A
    // condition where the chosen full config was not measured (a probe stored by an older
    // build, which measured only the MAC config's own pair) falls back to that pair's baseline.
    std::map<std::pair<double, std::string>, const TimeStats*> chosen_full_at;
    for (const PairRow* r : list)
      if (!r->full_partial && r->full_config == d.full.config)
        chosen_full_at.try_emplace({r->hit_rate, r->variant}, &r->full);
    std::map<std::string, std::map<double, CurvePoint>> curves;
    std::map<double, SkipPoint> skips;
    for (const PairRow* r : list) {
      if (r->mac_partial || r->mac_config != d.mac.config) continue;
      const auto at = chosen_full_at.find({r->hit_rate, r->variant});
      const TimeStats& base = at != chosen_full_at.end() ? *at->second : r->full;
      if (r->skip_ratio) {
        SkipPoint s{*r->skip_ratio, r->measured_skip, r->mac.median_s, base.median_s};
        s.speedup = r->mac.median_s > 0 ? base.median_s / r->mac.median_s : 0.0;
        s.verdict = interval_verdict(r->mac, base);
        skips.try_emplace(s.skip_ratio, s);
        continue;
      }
      CurvePoint p;
      p.hit_rate = r->hit_rate;
      p.speedup = r->mac.median_s > 0 ? base.median_s / r->mac.median_s : 0.0;
      p.verdict = interval_verdict(r->mac, base);
      curves[r->variant].try_emplace(p.hit_rate, p);
    }
    int worst = -1;  // 0 ok, 1 ambiguous, 2 never
    for (const auto& [variant, pts] : curves) {
      std::vector<CurvePoint> curve;
      for (const auto& [h, p] : pts) curve.push_back(p);
      BreakEven be = break_even_of(curve);
      const int rank = be.status == BreakEvenStatus::never       ? 2
                       : be.status == BreakEvenStatus::ambiguous ? 1
                                                                 : 0;
      const bool worse =
          rank > worst || (rank == 0 && worst == 0 && be.hit_rate && d.break_even.hit_rate &&
                           *be.hit_rate > *d.break_even.hit_rate);
      if (worse) {
        d.break_even = be;
        worst = std::max(worst, rank);
      }
      d.by_variant[variant] = std::move(be);
    }
    if (curves.empty()) d.break_even = break_even_of({});  // skip ratios only: ambiguous
    std::vector<CurvePoint> by_skip;
    for (const auto& [s, p] : skips) {
      d.skip_curve.push_back(p);
      by_skip.push_back({s, p.speedup, p.verdict});
    }
    if (!by_skip.empty()) d.skip_break_even = break_even_of(by_skip);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace mactune::tuner
