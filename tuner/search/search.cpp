#include "tuner/search/search.h"

#include <cmath>
#include <map>
#include <sstream>

#include "kernels/forced.h"
#include "tuner/decide/cost_model.h"
#include "tuner/decide/store_io.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {

std::string_view search_stop_name(SearchStop s) {
  switch (s) {
    case SearchStop::open:
      return "open";
    case SearchStop::resolution:
      return "resolution";
    case SearchStop::tie:
      return "tie";
    case SearchStop::no_bracket:
      return "none";
  }
  return "?";
}

SearchStatus search_status(const BreakEven& be, double resolution, int units,
                           const std::set<double>& grid_rates,
                           const std::vector<int>* work_changes) {
  SearchStatus s;
  if (be.status != BreakEvenStatus::ok || !be.hit_rate) return s;
  s.hi = *be.hit_rate;
  s.lo = be.lo.value_or(s.hi);
  s.lo_closed = be.lo_closed;
  if (!(s.lo < s.hi)) return s;  // MAC clearly faster from hit rate 0
  const CurvePoint* at_lo = nullptr;
  for (const CurvePoint& p : be.curve)
    if (p.hit_rate == s.lo) at_lo = &p;
  if (at_lo && at_lo->verdict == Verdict::tie && !grid_rates.count(s.lo)) {
    s.stop = SearchStop::tie;
    return s;
  }
  // The work of a rate is its quota's: rates of one quota are one measurement, and so are
  // quotas between two work changes.
  const int q_lo = forced_quota(s.lo, units), q_hi = forced_quota(s.hi, units);
  std::vector<int> inside;  // candidate quotas strictly inside (q_lo, q_hi)
  bool same_work = true;    // no change in (q_lo, q_hi]
  if (work_changes) {
    for (int k : *work_changes) {
      if (k > q_lo && k < q_hi) inside.push_back(k);
      if (k > q_lo && k <= q_hi) same_work = false;
    }
  } else {
    for (int k = q_lo + 1; k < q_hi; ++k) inside.push_back(k);
    same_work = q_hi == q_lo;
  }
  if (same_work) {
    s.stop = SearchStop::tie;
    return s;
  }
  if (s.hi - s.lo <= resolution + 1e-12 || inside.empty()) {
    s.stop = SearchStop::resolution;
    return s;
  }
  s.stop = SearchStop::open;
  s.next = static_cast<double>(inside[(inside.size() - 1) / 2]) / units;
  if (!work_changes) s.next = static_cast<double>((q_lo + q_hi) / 2) / units;
  return s;
}

std::vector<TunePoint> next_probes(const std::vector<BucketDecision>& decisions,
                                   const std::vector<TunePoint>& grid, double resolution) {
  // The grid points of each bucket's chosen MAC config, by variant; and a point whose full
  // side is the chosen full config (its launch), the baseline the break-even is against.
  std::map<std::pair<std::string, std::string>, std::vector<const TunePoint*>> chosen;
  std::map<std::pair<std::string, std::string>, const TunePoint*> chosen_full;
  std::map<std::string, const BucketDecision*> by_bucket;
  for (const BucketDecision& d : decisions) by_bucket[d.bucket.key()] = &d;
  for (const TunePoint& p : grid) {
    const auto it = by_bucket.find(bucket_of(p).key());
    if (it == by_bucket.end()) continue;
    const std::pair<std::string, std::string> key{it->first, variant_of(to_db_workload(p))};
    if (p.launch() == it->second->full.config.launch) chosen_full.try_emplace(key, &p);
    const Config& mac = it->second->mac.config;
    if (p.launch() != mac.launch || !mac.mac || p.mac != *mac.mac) continue;
    chosen[key].push_back(&p);
  }
  std::vector<TunePoint> probes;
  for (const BucketDecision& d : decisions)
    for (const auto& [variant, be] : d.by_variant) {
      const auto it = chosen.find({d.bucket.key(), variant});
      if (it == chosen.end()) continue;  // not in this grid (or shard)
      const TunePoint& p = *it->second.front();
      std::set<double> rates;
      for (const TunePoint* q : it->second) rates.insert(q->forced.hit_rate);
      const int units =
          p.shape.batch *
          (p.forced.coherence == Coherence::per_head ? p.shape.q_heads : p.shape.kv_heads);
      const std::vector<int> changes = work_changes(p, units);
      const SearchStatus s = search_status(be, resolution, units, rates, &changes);
      if (s.stop != SearchStop::open) continue;
      TunePoint probe = p;
      probe.forced.hit_rate = *s.next;
      probes.push_back(probe);
      // The chosen full config at the same rate, when its launch differs from the MAC
      // config's: measured in the probe's group, interleaved with it.
      const auto f = chosen_full.find({d.bucket.key(), variant});
      if (f != chosen_full.end() && f->second->launch() != p.launch()) {
        TunePoint base = *f->second;
        base.forced.hit_rate = *s.next;
        base.index = probe.index;  // owned by the probe's shard: measured in its group
        probes.push_back(base);
      }
    }
  return probes;
}

std::vector<int> work_changes(const TunePoint& p, int units) {
  StepSpec s;
  s.shape = p.shape;
  s.context = p.context;
  s.mac = p.mac;
  s.forced = p.forced;
  s.forced.enabled = true;
  s.limits = cpu_plan_limits(1, 1 << 30);  // the plan does not matter here: only the KV read
  std::vector<int> out;
  long long before = -1;
  for (int k = 0; k <= units; ++k) {
    s.forced.hit_rate = static_cast<double>(k) / units;
    const long long kv = step_features(s).stats.kv_tokens_read;
    if (k > 0 && kv != before) out.push_back(k);
    before = kv;
  }
  return out;
}

std::string search_text(const SearchStatus& s) {
  std::ostringstream o;
  o << "search=" << search_stop_name(s.stop);
  if (s.stop != SearchStop::no_bracket)
    o << " bracket=" << (s.lo_closed ? '[' : '(') << format_number(s.lo) << ','
      << format_number(s.hi) << ']';
  if (s.next) o << " next=" << format_number(*s.next);
  return o.str();
}

}  // namespace mactune::tuner
