// `search: halving` over the points of one bucket (every condition: hit rate, lag, coherence).
// Brief rounds: every alive config at every condition, sampled interleaved with the other
// alive configs; the configs ranked by the decisions' own scores (decide() on the round's
// rows), the better half kept; baselines (full configs) halved the same way. Samples
// accumulate round by round. Then the survivors, and every baseline an alive MAC config pairs
// with, sampled on under the spec's stopping rule, as exhaustive samples every point. Every
// point is stored at the end, in one transaction: its last measurement, partial unless it was
// in the final round.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "tuner/decide.h"
#include "tuner/expr.h"
#include "tuner/halving.h"
#include "tuner/sweep_parts.h"

namespace mactune::tuner::sweep_parts {
namespace {

// A case's last measurement.
struct Last {
  SideResult side;
  ClockState clock;
  std::string notes;
  int round = 0;
  bool final = false;
};

struct Round {
  MeasurePolicy policy;
  int round = 0;
  bool final = false;
  bool macs = true, fulls = true;  // which sides are still ranked (both in the final)
};

class Halving {
 public:
  Halving(SweepContext& ctx, const std::vector<PendingPoint>& pending)
      : ctx_(ctx), pending_(pending) {}

  void run(const std::vector<std::size_t>& members) {
    for (std::size_t i : members) {
      const std::string why = ctx_.backend.can_run(point(i));
      if (why.empty())
        runnable_.push_back(i);
      else
        ctx_.fail(pending_[i], db::now_utc(), why);
    }
    if (runnable_.empty()) return;
    const std::string bucket = bucket_of(point(runnable_[0])).key();
    if (!ctx_.fits_in_memory(pending_, runnable_)) {
      ctx_.progress.note("mactune: the configs of " + bucket +
                         " do not fit in memory together: measuring them exhaustively");
      std::map<std::string, std::vector<std::size_t>> by_condition;
      for (std::size_t i : runnable_) by_condition[group_key(point(i))].push_back(i);
      for (auto& [k, g] : by_condition) ctx_.exhaustive(pending_, g);
      return;
    }
    ctx_.release_cases();
    const std::string started = db::now_utc();
    build_cases();
    std::set<std::string> alive_mac, alive_full;  // config ids, as decide() spells them
    for (std::size_t i : runnable_)
      if (!failed_.count(i)) {
        alive_mac.insert(mac_id(point(i)));
        alive_full.insert(full_id(point(i)));
      }
    bool mac_done = alive_mac.size() <= 1, full_done = alive_full.size() <= 1;
    const StoppingPolicy& stop = ctx_.spec.measure.stop;
    for (int round = 0;; ++round) {
      const int samples = halving_samples(ctx_.spec.search.first_samples, round, stop.max_samples);
      const bool final = (mac_done && full_done) || samples >= stop.max_samples;
      // Samples accumulate: round k takes each alive case to `samples` in all (a doubling
      // budget at half the cost of fresh samples), and the final round continues them under
      // the spec's stopping rule. Round 0 warms each case up once (they were just built and
      // prefilled); later rounds reuse them warm.
      Round what{ctx_.spec.measure, round, final, final || !mac_done, final || !full_done};
      if (!final) {
        what.policy.stop.min_samples = what.policy.stop.max_samples = samples;
        what.policy.stop.noise = -1;  // a fixed budget: never stop on noise
        what.policy.stop.stable_window = samples + 1;
        what.policy.stop.min_time = 0;
      }
      what.policy.stop.warmup = round == 0 ? std::min(stop.warmup, 1) : 0;
      ctx_.progress.begin(bucket + " halving round " + std::to_string(round) + ": " +
                          std::to_string(alive_mac.size()) + " MAC and " +
                          std::to_string(alive_full.size()) + " full configs" +
                          (final ? ", final" : " to " + std::to_string(samples) + " samples"));
      run_round(alive_mac, alive_full, what);
      if (final) break;
      const std::size_t before_mac = alive_mac.size(), before_full = alive_full.size();
      // Each side is ranked alone: the other side of these rows is a copy, and ignored.
      std::vector<PairRow> mac_rows, full_rows;
      std::set<std::pair<std::string, std::string>> full_seen;
      for (std::size_t i : runnable_) {
        if (failed_.count(i)) continue;
        const TunePoint& p = point(i);
        const auto mit = mac_last_.find(i);
        if (alive_mac.count(mac_id(p)) && mit != mac_last_.end() && mit->second.round == round)
          mac_rows.push_back(pair_row(p, mit->second.side, mit->second.side));
        const auto fit = full_last_.find({full_key(ctx_.backend, p), group_key(p)});
        if (alive_full.count(full_id(p)) && fit != full_last_.end() && fit->second.round == round &&
            full_seen.insert(fit->first).second)
          full_rows.push_back(pair_row(p, fit->second.side, fit->second.side));
      }
      // Ties count once the budget reaches min_samples: the intervals of 2 or 4 samples
      // overlap for nearly every config and would stop the search at once.
      const bool ties = samples >= stop.min_samples;
      if (!mac_done) mac_done = keep_better_half(mac_rows, true, ties, alive_mac);
      if (!full_done) full_done = keep_better_half(full_rows, false, ties, alive_full);
      ctx_.progress.note(bucket + " halving round " + std::to_string(round) + " (" +
                         std::to_string(samples) + " samples): MAC configs " +
                         std::to_string(before_mac) + " -> " + std::to_string(alive_mac.size()) +
                         ", full configs " + std::to_string(before_full) + " -> " +
                         std::to_string(alive_full.size()));
      for (auto& [i, c] : macs_)
        if (c && !alive_mac.count(mac_id(point(i)))) c.reset();  // free dropped configs
    }
    store(started);
  }

 private:
  const TunePoint& point(std::size_t i) const { return *pending_[i].point; }

  std::string mac_id(const TunePoint& p) const {
    return Config{ctx_.backend.instance_names(p).first, p.launch(), p.mac}.id();
  }
  std::string full_id(const TunePoint& p) const {
    return Config{ctx_.backend.instance_names(p).second, p.launch(), std::nullopt}.id();
  }

  // Every case, built once and kept while its config is alive.
  void build_cases() {
    for (std::size_t i : runnable_) {
      const TunePoint& p = point(i);
      const std::string fk = full_key(ctx_.backend, p);
      try {
        if (!fulls_[fk]) fulls_[fk] = ctx_.backend.make_case(p, false, point_seed(ctx_.spec, p));
        macs_[i] = ctx_.backend.make_case(p, true, point_seed(ctx_.spec, p));
      } catch (const Error& e) {
        failed_[i] = e.what();
      }
    }
  }

  PairRow pair_row(const TunePoint& p, const SideResult& mac, const SideResult& full) const {
    PairRow r;
    r.bucket = bucket_of(p);
    r.hit_rate = p.forced.hit_rate;
    r.variant = group_key(p);
    r.mac_instance = mac.instance;
    r.full_instance = full.instance;
    r.launch = p.launch();
    r.mac_settings = p.mac;
    r.mac = mac.time;
    r.full = full.time;
    return r;
  }

  // Keeps the better half of `alive` by decide()'s scores; whether the side is settled.
  bool keep_better_half(const std::vector<PairRow>& rows, bool mac, bool ties,
                        std::set<std::string>& alive) const {
    DecideOptions opt;
    opt.tie_tolerance = ctx_.spec.tie_tolerance;
    opt.ties = ctx_.spec.ties;
    const std::vector<BucketDecision> d = decide(rows, opt);
    if (d.empty()) return true;
    std::vector<HalvingScore> scores;
    std::vector<std::string> ids;
    for (const Choice& c : mac ? d[0].mac_candidates : d[0].full_candidates)
      if (alive.count(c.config.id())) {
        scores.push_back({c.score, c.tie_score});
        ids.push_back(c.config.id());
      }
    const HalvingStep step = halving_step(scores, ctx_.spec.tie_tolerance, ties);
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
    for (std::size_t i : runnable_)
      if (!failed_.count(i)) by_condition[group_key(point(i))].push_back(i);
    for (const auto& [condition, g] : by_condition) {
      std::vector<Case*> cases;
      std::map<std::string, std::size_t> full_at;
      std::map<std::size_t, std::size_t> mac_at;
      for (std::size_t i : g) {
        const TunePoint& p = point(i);
        const bool mac_alive = alive_mac.count(mac_id(p)) > 0;
        const bool full_needed =
            (what.fulls && alive_full.count(full_id(p))) || (what.final && mac_alive);
        const std::string fk = full_key(ctx_.backend, p);
        if (full_needed && !full_at.count(fk)) {
          full_at[fk] = cases.size();
          cases.push_back(fulls_.at(fk).get());
        }
        if (what.macs && mac_alive) {
          mac_at[i] = cases.size();
          cases.push_back(macs_.at(i).get());
        }
      }
      if (cases.empty()) continue;
      std::vector<std::vector<double>> prior(cases.size());
      for (const auto& [i, at] : mac_at)
        if (const auto it = mac_last_.find(i); it != mac_last_.end())
          prior[at] = it->second.side.samples;
      for (const auto& [fk, at] : full_at)
        if (const auto it = full_last_.find({fk, condition}); it != full_last_.end())
          prior[at] = it->second.side.samples;
      const double cap = ctx_.spec.measure.stop.time_cap * static_cast<double>(cases.size());
      GroupResult r;
      try {
        r = measure_group(ctx_.backend, cases, what.policy, cap, ctx_.stop, prior);
      } catch (const Error& e) {
        for (std::size_t i : g) failed_.try_emplace(i, e.what());
        continue;
      }
      ctx_.counts.measuring_seconds += r.wall_seconds;
      const std::string notes = group_notes(ctx_.backend, r, cases.size());
      for (const auto& [i, at] : mac_at)
        mac_last_[i] = {r.sides.at(at), r.clock, notes, what.round, what.final};
      for (const auto& [fk, at] : full_at)
        full_last_[{fk, condition}] = {r.sides.at(at), r.clock, notes, what.round, what.final};
    }
  }

  // Every point: its last MAC measurement and its baseline's last one at its condition.
  void store(const std::string& started) {
    std::vector<db::Measurement> rows;
    std::vector<std::string> lines;
    for (std::size_t i : runnable_) {
      const TunePoint& p = point(i);
      const auto mit = mac_last_.find(i);
      const auto fit = full_last_.find({full_key(ctx_.backend, p), group_key(p)});
      if (failed_.count(i) || mit == mac_last_.end() || fit == full_last_.end()) {
        ctx_.fail(pending_[i], started, failed_.count(i) ? failed_.at(i) : "not measured");
        continue;
      }
      const Last& mac = mit->second;
      const Last& full = fit->second;
      db::Measurement mm = row(pending_[i].mac, ctx_.run_id, started);
      db::Measurement mf = row(pending_[i].full, ctx_.run_id, started);
      for (auto [m, l] : {std::pair{&mm, &mac}, std::pair{&mf, &full}}) {
        m->stats = l->side.time;
        m->stop_reason = std::string(name_of(l->side.stop));
        m->modeled_bytes = static_cast<double>(l->side.stats.modeled_bytes());
        m->clock_mhz = l->clock.mhz;
        m->throttled_samples = l->clock.throttled_samples;
        m->partial = !l->final;
        m->notes = l->notes + "; search=halving; round=" + std::to_string(l->round) +
                   (l->final ? " (final)" : " (dropped)") + "; skip_ratio=" +
                   format_number(std::round(l->side.stats.skip_ratio() * 1e4) / 1e4);
      }
      rows.push_back(mf);
      rows.push_back(mm);
      ++ctx_.counts.measured;
      const double speedup =
          mac.side.time.median_s > 0 ? full.side.time.median_s / mac.side.time.median_s : 0;
      std::ostringstream o;
      o << point_label(p) << ": mac " << ms(mac.side.time.median_s)
        << " (n=" << mac.side.time.samples << (mac.final ? "" : ", dropped") << "), full "
        << ms(full.side.time.median_s) << " (n=" << full.side.time.samples
        << (full.final ? "" : ", dropped") << "), " << std::fixed << std::setprecision(2) << speedup
        << "x";
      lines.push_back(o.str());
    }
    // All of the bucket or nothing: a kill part way leaves it to be searched again.
    ctx_.store.record_measurements(rows);
    for (const std::string& l : lines) ctx_.progress.end(l, true);
  }

  SweepContext& ctx_;
  const std::vector<PendingPoint>& pending_;
  std::vector<std::size_t> runnable_;
  std::map<std::string, std::unique_ptr<Case>> fulls_;
  std::map<std::size_t, std::unique_ptr<Case>> macs_;
  std::map<std::size_t, std::string> failed_;
  std::map<std::size_t, Last> mac_last_;                           // member -> last result
  std::map<std::pair<std::string, std::string>, Last> full_last_;  // (full key, condition)
};

}  // namespace

void halving_bucket(SweepContext& ctx, const std::vector<PendingPoint>& pending,
                    const std::vector<std::size_t>& members) {
  Halving(ctx, pending).run(members);
}

}  // namespace mactune::tuner::sweep_parts
