#include "tuner/decide.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

namespace mactune::tuner {

std::string Choice::id() const {
  return instance + "|" + params + "|" + mac_settings;
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::faster:
      return "faster";
    case Verdict::slower:
      return "slower";
    case Verdict::tie:
      return "tie";
  }
  return "?";
}

namespace {

// Simplicity order, the last word among tied configs: smaller ring first (less memory), then
// launch parameters in grid order with 0 ("auto", the default) first and then smaller values
// (fewer threads, smaller tiles), then names, so the order is total and deterministic.
struct Simplicity {
  int K = 0, r = 0;
  std::vector<std::pair<double, std::string>> params;
  std::string text;

  static Simplicity of(const Choice& c) {
    Simplicity s;
    s.K = c.K;
    s.r = c.r;
    std::istringstream in(c.params);
    std::string kv;
    while (std::getline(in, kv, ',')) {
      const auto eq = kv.find('=');
      const std::string v = eq == std::string::npos ? kv : kv.substr(eq + 1);
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      const bool numeric = end && *end == '\0' && !v.empty();
      s.params.emplace_back(numeric ? (x == 0 ? -1.0 : x) : 0.0, numeric ? "" : v);
    }
    s.text = c.instance + "|" + c.mac_settings;
    return s;
  }
  auto operator<=>(const Simplicity&) const = default;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, 0.5);
}

// Picks among scored candidates: the lowest score, unless the incumbent or a simpler config is
// within the tie tolerance.
Choice choose(std::vector<Choice> cands, double tol, const std::string& incumbent) {
  if (cands.empty()) return {};
  std::sort(cands.begin(), cands.end(), [](const Choice& a, const Choice& b) {
    if (a.score != b.score) return a.score < b.score;
    return Simplicity::of(a) < Simplicity::of(b);
  });
  const double best = cands.front().score;
  std::vector<Choice> tied;
  for (const Choice& c : cands)
    if (c.score <= best * (1.0 + tol)) tied.push_back(c);
  Choice chosen = tied.front();
  chosen.reason = cands.size() == 1 ? "only" : "fastest";
  if (tied.size() > 1) {
    const auto inc = std::find_if(tied.begin(), tied.end(),
                                  [&](const Choice& c) { return c.id() == incumbent; });
    if (inc != tied.end()) {
      if (inc != tied.begin()) chosen = *inc, chosen.reason = "incumbent";
    } else {
      const auto simplest = std::min_element(tied.begin(), tied.end(), [](auto& a, auto& b) {
        return Simplicity::of(a) < Simplicity::of(b);
      });
      if (simplest != tied.begin()) chosen = *simplest, chosen.reason = "simpler";
    }
  }
  chosen.ties.clear();
  chosen.ties.push_back(chosen.id());
  for (const Choice& c : tied)
    if (c.id() != chosen.id()) chosen.ties.push_back(c.id());
  // Margin: how much slower the best config outside the tie set is.
  chosen.margin = 0;
  for (const Choice& c : cands)
    if (c.score > best * (1.0 + tol)) {
      chosen.margin = c.score / chosen.score - 1.0;
      break;
    }
  return chosen;
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
    be.status = "ok";
    be.hit_rate = curve[first_win].hit_rate;
  } else {
    const bool any_tie = std::any_of(curve.begin(), curve.end(),
                                     [](const CurvePoint& p) { return p.verdict == Verdict::tie; });
    be.status = any_tie || curve.empty() ? "ambiguous" : "never";
  }
  return be;
}

std::vector<BucketDecision> decide(const std::vector<PairRow>& rows, const DecideOptions& opt) {
  std::map<Bucket, std::vector<const PairRow*>> by_bucket;
  for (const PairRow& r : rows) by_bucket[r.bucket].push_back(&r);
  std::vector<BucketDecision> out;
  for (const auto& [bucket, list] : by_bucket) {
    BucketDecision d;
    d.bucket = bucket;
    const std::string bk = bucket.key();
    auto incumbent = [&](const char* fam) {
      const auto it = opt.incumbents.find(bk + "/" + fam);
      return it == opt.incumbents.end() ? std::string() : it->second;
    };

    // Full baseline: every pair measured it; a config's score is the median of its medians.
    std::map<std::string, std::pair<Choice, std::vector<double>>> full;
    for (const PairRow* r : list) {
      Choice c;
      c.instance = r->full_instance;
      c.params = r->params;
      auto& slot = full[c.id()];
      slot.first = c;
      slot.second.push_back(r->full.median);
    }
    std::vector<Choice> full_cands;
    for (auto& [id, slot] : full) {
      slot.first.score = median_of(slot.second);
      full_cands.push_back(slot.first);
    }
    d.full = choose(full_cands, opt.tie_tolerance, incumbent("full"));

    // MAC: each config scored by the geometric mean, over the conditions it was measured at
    // (hit rate x variant), of its time over the best time at that condition.
    std::map<std::pair<double, std::string>, double> best_at;
    for (const PairRow* r : list) {
      auto [it, fresh] = best_at.try_emplace({r->hit_rate, r->variant}, r->mac.median);
      if (!fresh) it->second = std::min(it->second, r->mac.median);
    }
    std::map<std::string, std::pair<Choice, std::vector<double>>> mac;
    for (const PairRow* r : list) {
      Choice c;
      c.instance = r->mac_instance;
      c.params = r->params;
      c.mac_settings = r->mac_settings;
      c.K = r->K;
      c.r = r->r;
      auto& slot = mac[c.id()];
      slot.first = c;
      const double best = best_at[{r->hit_rate, r->variant}];
      slot.second.push_back(best > 0 ? std::log(r->mac.median / best) : 0.0);
    }
    std::vector<Choice> mac_cands;
    for (auto& [id, slot] : mac) {
      double sum = 0;
      for (double x : slot.second) sum += x;
      slot.first.score = std::exp(sum / static_cast<double>(slot.second.size()));
      mac_cands.push_back(slot.first);
    }
    d.mac = choose(mac_cands, opt.tie_tolerance, incumbent("mac"));

    // Break-even of the chosen MAC config against its in-run baselines, per variant.
    std::map<std::string, std::map<double, CurvePoint>> curves;
    for (const PairRow* r : list) {
      if (r->mac_instance != d.mac.instance || r->params != d.mac.params ||
          r->mac_settings != d.mac.mac_settings)
        continue;
      CurvePoint p;
      p.hit_rate = r->hit_rate;
      p.speedup = r->mac.median > 0 ? r->full.median / r->mac.median : 0.0;
      p.verdict = r->mac.q3 < r->full.q1   ? Verdict::faster
                  : r->mac.q1 > r->full.q3 ? Verdict::slower
                                           : Verdict::tie;
      curves[r->variant].try_emplace(p.hit_rate, p);
    }
    int worst = -1;  // 0 ok, 1 ambiguous, 2 never
    for (const auto& [variant, pts] : curves) {
      std::vector<CurvePoint> curve;
      for (const auto& [h, p] : pts) curve.push_back(p);
      BreakEven be = break_even_of(curve);
      const int rank = be.status == "never" ? 2 : be.status == "ambiguous" ? 1 : 0;
      const bool worse =
          rank > worst || (rank == 0 && worst == 0 && be.hit_rate && d.break_even.hit_rate &&
                           *be.hit_rate > *d.break_even.hit_rate);
      if (worse) {
        d.break_even = be;
        worst = std::max(worst, rank);
      }
      d.by_variant[variant] = std::move(be);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace mactune::tuner
