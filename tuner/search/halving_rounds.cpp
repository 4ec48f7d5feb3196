#include "tuner/search/halving_rounds.h"

#include <algorithm>
#include <set>

#include "kernels/error.h"
#include "tuner/search/halving.h"
#include "tuner/search/sweep_parts.h"

namespace mactune::tuner {
namespace {

using sweep_parts::full_key;
using sweep_parts::group_key;

struct Round {
  MeasurePolicy policy;
  int round = 0;
  bool final = false;
  bool macs = true, fulls = true;  // which sides are still ranked (both in the final)
};

class Rounds {
 public:
  Rounds(const Spec& spec, std::span<const HalvingPoint> points,
         std::map<std::size_t, std::string> failed, HalvingSampler& sampler, Progress& progress)
      : spec_(spec), points_(points), sampler_(sampler), progress_(progress) {
    out_.failed = std::move(failed);
  }

  HalvingOutcome run() {
    if (points_.empty()) return std::move(out_);
    const std::string bucket = bucket_of(*points_[0].point).key();
    std::set<std::string> alive_mac, alive_full;  // config ids, as decide() spells them
    for (std::size_t i = 0; i < points_.size(); ++i)
      if (!out_.failed.count(i)) {
        alive_mac.insert(mac_id(i));
        alive_full.insert(full_id(i));
      }
    bool mac_done = alive_mac.size() <= 1, full_done = alive_full.size() <= 1;
    const StoppingPolicy& stop = spec_.measure.stop;
    for (int round = 0;; ++round) {
      const int samples = halving_samples(spec_.search.first_samples, round, stop.max_samples);
      const bool final = (mac_done && full_done) || samples >= stop.max_samples;
      // Samples accumulate: round k takes each alive case to `samples` in all (a doubling
      // budget at half the cost of fresh samples), and the final round continues them under
      // the spec's stopping rule. Round 0 warms each case up once (they were just built and
      // prefilled); later rounds reuse them warm.
      Round what{spec_.measure, round, final, final || !mac_done, final || !full_done};
      if (!final) {
        what.policy.stop.min_samples = what.policy.stop.max_samples = samples;
        what.policy.stop.noise = -1;  // a fixed budget: never stop on noise
        what.policy.stop.stable_window = samples + 1;
        what.policy.stop.min_time = 0;
      }
      what.policy.stop.warmup = round == 0 ? std::min(stop.warmup, 1) : 0;
      progress_.begin(bucket + " halving round " + std::to_string(round) + ": " +
                      std::to_string(alive_mac.size()) + " MAC and " +
                      std::to_string(alive_full.size()) + " full configs" +
                      (final ? ", final" : " to " + std::to_string(samples) + " samples"));
      run_round(alive_mac, alive_full, what);
      HalvingRoundTrace trace{final ? 0 : samples, alive_mac.size(), alive_mac.size(),
                              alive_full.size(), alive_full.size()};
      if (final) {
        out_.rounds.push_back(trace);
        break;
      }
      // Each side is ranked alone: the other side of these rows is a copy, and ignored.
      std::vector<PairRow> mac_rows, full_rows;
      std::set<std::pair<std::string, std::string>> full_seen;
      for (std::size_t i = 0; i < points_.size(); ++i) {
        if (out_.failed.count(i)) continue;
        const HalvingPoint& p = points_[i];
        const auto mit = out_.mac.find(i);
        if (alive_mac.count(mac_id(i)) && mit != out_.mac.end() && mit->second.round == round)
          mac_rows.push_back(halving_pair_row(p, mit->second.side.time, mit->second.side.time));
        const auto fkey = std::pair{full_key(*p.point, p.full_instance), group_key(*p.point)};
        const auto fit = out_.baseline.find(fkey);
        if (alive_full.count(full_id(i)) && fit != out_.baseline.end() &&
            fit->second.round == round && full_seen.insert(fkey).second)
          full_rows.push_back(halving_pair_row(p, fit->second.side.time, fit->second.side.time));
      }
      // Ties count once the budget reaches min_samples: the intervals of 2 or 4 samples
      // overlap for nearly every config and would stop the search at once.
      const bool ties = samples >= stop.min_samples;
      if (!mac_done) mac_done = keep_better_half(mac_rows, true, ties, alive_mac);
      if (!full_done) full_done = keep_better_half(full_rows, false, ties, alive_full);
      trace.mac_after = alive_mac.size();
      trace.full_after = alive_full.size();
      out_.rounds.push_back(trace);
      progress_.note(bucket + " halving round " + std::to_string(round) + " (" +
                     std::to_string(samples) + " samples): MAC configs " +
                     std::to_string(trace.mac_before) + " -> " + std::to_string(trace.mac_after) +
                     ", full configs " + std::to_string(trace.full_before) + " -> " +
                     std::to_string(trace.full_after));
      for (std::size_t i = 0; i < points_.size(); ++i)
        if (!out_.failed.count(i) && !alive_mac.count(mac_id(i))) sampler_.dropped(i);
    }
    return std::move(out_);
  }

 private:
  std::string mac_id(std::size_t i) const {
    return config_of(*points_[i].point, points_[i].mac_instance, Family::mac).id();
  }
  std::string full_id(std::size_t i) const {
    return config_of(*points_[i].point, points_[i].full_instance, Family::full).id();
  }

  // Keeps the better half of `alive` by decide()'s scores; whether the side is settled.
  bool keep_better_half(const std::vector<PairRow>& rows, bool mac, bool ties,
                        std::set<std::string>& alive) const {
    DecideOptions opt;
    opt.tie_tolerance = spec_.decide.tie_tolerance;
    opt.ties = spec_.decide.ties;
    const std::vector<BucketDecision> d = decide(rows, opt);
    if (d.empty()) return true;
    std::vector<HalvingScore> scores;
    std::vector<std::string> ids;
    for (const Choice& c : mac ? d[0].mac_candidates : d[0].full_candidates)
      if (alive.count(c.config.id())) {
        scores.push_back({c.score, c.tie_score});
        ids.push_back(c.config.id());
      }
    const HalvingStep step = halving_step(scores, spec_.decide.tie_tolerance, ties);
    alive.clear();
    for (std::size_t k : step.keep) alive.insert(ids[k]);
    return step.last;
  }

  // One round, per condition: the alive MAC cases (while MAC configs are ranked) and the alive
  // baselines (while they are ranked), sampled interleaved; in the final round also every
  // baseline an alive MAC config pairs with, so its break-even comes from one run.
  void run_round(const std::set<std::string>& alive_mac, const std::set<std::string>& alive_full,
                 const Round& what) {
    std::map<std::string, std::vector<std::size_t>> by_condition;
    for (std::size_t i = 0; i < points_.size(); ++i)
      if (!out_.failed.count(i)) by_condition[group_key(*points_[i].point)].push_back(i);
    for (const auto& [condition, g] : by_condition) {
      std::vector<HalvingCase> cases;
      std::map<std::string, std::size_t> full_at;
      std::map<std::size_t, std::size_t> mac_at;
      for (std::size_t i : g) {
        const bool mac_alive = alive_mac.count(mac_id(i)) > 0;
        const bool full_needed =
            (what.fulls && alive_full.count(full_id(i))) || (what.final && mac_alive);
        const std::string fk = full_key(*points_[i].point, points_[i].full_instance);
        if (full_needed && !full_at.count(fk)) {
          full_at[fk] = cases.size();
          cases.push_back({i, false});
        }
        if (what.macs && mac_alive) {
          mac_at[i] = cases.size();
          cases.push_back({i, true});
        }
      }
      if (cases.empty()) continue;
      std::vector<std::vector<double>> prior(cases.size());
      for (const auto& [i, at] : mac_at)
        if (const auto it = out_.mac.find(i); it != out_.mac.end())
          prior[at] = it->second.side.samples;
      for (const auto& [fk, at] : full_at)
        if (const auto it = out_.baseline.find({fk, condition}); it != out_.baseline.end())
          prior[at] = it->second.side.samples;
      const double cap = spec_.measure.stop.time_cap * static_cast<double>(cases.size());
      SampledGroup s;
      try {
        s = sampler_.sample(cases, what.policy, cap, prior);
      } catch (const Error& e) {
        for (std::size_t i : g) out_.failed.try_emplace(i, e.what());
        continue;
      }
      const GroupResult& r = s.result;
      for (const auto& [i, at] : mac_at)
        out_.mac[i] = {r.sides.at(at), r.clock, s.notes, what.round, what.final};
      for (const auto& [fk, at] : full_at)
        out_.baseline[{fk, condition}] = {r.sides.at(at), r.clock, s.notes, what.round, what.final};
    }
  }

  const Spec& spec_;
  std::span<const HalvingPoint> points_;
  HalvingSampler& sampler_;
  Progress& progress_;
  HalvingOutcome out_;
};

}  // namespace

const HalvingSide* HalvingOutcome::full_of(std::span<const HalvingPoint> points,
                                           std::size_t i) const {
  const HalvingPoint& p = points[i];
  const auto it = baseline.find({full_key(*p.point, p.full_instance), group_key(*p.point)});
  return it == baseline.end() ? nullptr : &it->second;
}

HalvingOutcome halving_rounds(const Spec& spec, std::span<const HalvingPoint> points,
                              std::map<std::size_t, std::string> failed, HalvingSampler& sampler,
                              Progress& progress) {
  return Rounds(spec, points, std::move(failed), sampler, progress).run();
}

PairRow halving_pair_row(const HalvingPoint& p, const TimeStats& mac, const TimeStats& full) {
  const TunePoint& t = *p.point;
  PairRow r;
  r.bucket = bucket_of(t);
  r.hit_rate = t.forced.hit_rate;
  r.variant = group_key(t);
  if (t.forced.quota == ForcedQuota::skip_ratio) r.skip_ratio = t.forced.skip_ratio;
  r.mac_config = config_of(t, p.mac_instance, Family::mac);
  r.full_config = config_of(t, p.full_instance, Family::full);
  r.mac = mac;
  r.full = full;
  return r;
}

}  // namespace mactune::tuner
