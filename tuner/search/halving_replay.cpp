#include "tuner/search/halving_replay.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "db/store.h"
#include "kernels/error.h"
#include "tuner/decide/store_io.h"
#include "tuner/search/sweep.h"
#include "tuner/search/sweep_parts.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {
namespace {

using sweep_parts::full_key;
using sweep_parts::group_key;

// The stored rows of one point.
struct StoredPair {
  const db::MeasurementRow* mac = nullptr;
  const db::MeasurementRow* full = nullptr;
};

double median_of(const std::vector<double>& v) {
  return summarize(v).median_s;
}
double percent(double part, double whole) {
  return whole > 0 ? 100 * part / whole : 0;
}

// A stopped-short stored row (time cap, interruption) keeps its reason when the replay runs
// out of its samples.
StopReason stored_reason(const db::MeasurementRow& r) {
  return r.m.stop_reason.value_or(StopReason::max_samples);
}

// "Measures" by taking the stored samples in order: a case continued from its prior samples
// gets the next ones, under the round's stopping rule (Convergence, as measure_group runs it).
// A case whose stored samples end before its rule is met runs short: the replay goes on with
// what is stored and counts it (a live run would have sampled on).
class ReplaySampler final : public HalvingSampler {
 public:
  explicit ReplaySampler(const std::vector<StoredPair>& stored) : stored_(stored) {}

  SampledGroup sample(std::span<const HalvingCase> cases, const MeasurePolicy& policy,
                      double /*time_cap*/, std::span<const std::vector<double>> prior) override {
    SampledGroup out;
    for (std::size_t c = 0; c < cases.size(); ++c) {
      const db::MeasurementRow& row =
          cases[c].mac ? *stored_[cases[c].point].mac : *stored_[cases[c].point].full;
      const std::vector<double>& have = row.m.samples;
      Convergence conv(policy.stop);
      const std::vector<double> none;
      const std::vector<double>& before = prior.empty() ? none : prior[c];
      MACTUNE_CHECK(
          before.size() <= have.size() && std::equal(before.begin(), before.end(), have.begin()),
          "replay: a case's prior samples are not its stored ones");
      for (double t : before) conv.add(t);
      for (std::size_t k = before.size(); !conv.done() && k < have.size(); ++k) {
        conv.add(have[k]);
        use.seconds += have[k];
        ++use.samples;
      }
      use.seconds += policy.stop.warmup * median_of(have);
      if (!conv.done()) {
        ++use.short_cases;
        // A fixed budget (a brief round) says how many are missing; they are costed at the
        // case's median. A stopping rule says only that more were needed.
        if (policy.stop.min_samples == policy.stop.max_samples) {
          const int missing = policy.stop.max_samples - static_cast<int>(conv.samples().size());
          use.missing_samples += missing;
          use.seconds += missing * median_of(have);
        }
      }
      SideResult side;
      side.instance = row.instance.name;
      side.samples = conv.samples();
      side.time = summarize(side.samples);
      side.stop = conv.done() ? conv.reason() : stored_reason(row);
      out.result.sides.push_back(std::move(side));
    }
    out.notes = "replayed";
    return out;
  }

  HalvingReplayUse use;

 private:
  const std::vector<StoredPair>& stored_;
};

// The exhaustive sweep replayed over the same samples: every case of every interleave group
// under the spec's stopping rule, warm-up included. Over a database the spec itself measured
// this is its stored rows (the rule met at the same sample); over a deeper one (more samples
// per row) it is what the spec's exhaustive sweep would have stored.
std::vector<PairRow> replay_exhaustive(const Spec& spec, std::span<const HalvingPoint> points,
                                       ReplaySampler& sampler) {
  std::vector<std::vector<std::size_t>> groups;
  std::map<std::string, std::size_t> group_at;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string g = spec.measure.interleave == Interleave::point
                              ? std::to_string(i)
                              : group_key(*points[i].point);
    const auto [it, fresh] = group_at.try_emplace(g, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  std::vector<PairRow> rows(points.size());
  for (const std::vector<std::size_t>& g : groups) {
    std::vector<HalvingCase> cases;
    std::map<std::string, std::size_t> full_at;
    for (std::size_t i : g)
      if (full_at.try_emplace(full_key(*points[i].point, points[i].full_instance), cases.size())
              .second)
        cases.push_back({i, false});
    for (std::size_t i : g) cases.push_back({i, true});
    const GroupResult r =
        sampler.sample(cases, spec.measure, spec.measure.stop.time_cap, {}).result;
    for (std::size_t k = 0; k < g.size(); ++k) {
      const HalvingPoint& p = points[g[k]];
      const SideResult& full = r.sides.at(full_at.at(full_key(*p.point, p.full_instance)));
      rows[g[k]] = halving_pair_row(p, r.sides.at(full_at.size() + k).time, full.time);
    }
  }
  return rows;
}

bool same_config(const Config& a, const Config& b) {
  return a.id() == b.id();
}

bool in_ties(const Config& c, const Choice& of) {
  return std::any_of(of.ties.begin(), of.ties.end(),
                     [&](const Config& t) { return same_config(t, c); });
}

std::string config_label(const Choice& c) {
  if (c.empty()) return "(none)";
  std::string s = launch_text(c.config.launch);
  if (c.config.mac)
    s += (s.empty() ? "" : " ") + std::string("K=") + std::to_string(c.config.mac->ring_capacity) +
         " r=" + std::to_string(c.config.mac->band);
  return s.empty() ? c.config.instance : s;
}

}  // namespace

PickAgreement agreement_of(const Choice& halving, const Choice& exhaustive) {
  if (same_config(halving.config, exhaustive.config)) return PickAgreement::same;
  if (in_ties(halving.config, exhaustive)) return PickAgreement::in_exhaustive_ties;
  if (in_ties(exhaustive.config, halving)) return PickAgreement::in_halving_ties;
  return PickAgreement::differs;
}

HalvingReplayResult replay_halving(const SweepPlan& plan, const std::string& db_path) {
  const Spec& spec = plan.spec;
  const db::Store store = db::Store::open(db_path, {.mode = db::OpenMode::read_only});
  const Selection sel = select_rows(store, "auto", plan.here.value_or(DeviceFingerprint{}));
  db::MeasurementFilter f;
  f.device_id = sel.device_id;
  f.build_id = sel.build_id;
  f.policy = sel.policy;
  f.cold = sel.cold;
  const std::vector<db::MeasurementRow> rows = store.measurements(f);
  std::map<std::string, const db::MeasurementRow*> by_key;  // instance|params|workload key
  for (const db::MeasurementRow& r : rows)
    if (!r.m.partial)
      by_key[r.instance.name + "|" + r.m.point.params + "|" + r.workload.key()] = &r;

  HalvingReplayResult out;
  out.db_path = db_path;
  for (const auto& d : store.devices())
    if (d.id == sel.device_id) out.device = d.digest + " " + d.fingerprint.name;
  // The plan's points by bucket, in grid order of their first point, with their stored rows.
  std::vector<std::string> order;
  std::map<std::string, std::vector<HalvingPoint>> points;
  std::map<std::string, std::vector<StoredPair>> stored;
  std::size_t missing = 0, without_samples = 0;
  std::string first_missing;
  for (std::size_t i = 0; i < plan.points.size(); ++i) {
    const TunePoint& p = plan.points[i];
    const auto& [mac_name, full_name] = plan.names[i];
    const std::string w = to_db_workload(p).key();
    const auto mit = by_key.find(mac_name + "|" + p.launch_text() + "|" + w);
    const auto fit = by_key.find(full_name + "|" + p.launch_text() + "|" + w);
    if (mit == by_key.end() || fit == by_key.end()) {
      if (!missing++)
        first_missing = bucket_of(p).key() + " " + point_label(p) + " (" +
                        (mit == by_key.end() ? mac_name : full_name) + ")";
      continue;
    }
    if (mit->second->m.samples.empty() || fit->second->m.samples.empty()) ++without_samples;
    const std::string b = bucket_of(p).key();
    if (!points.count(b)) order.push_back(b);
    points[b].push_back({&p, mac_name, full_name});
    stored[b].push_back({mit->second, fit->second});
  }
  if (missing)
    input_error(db_path, ": holds no complete measurement of ", missing, " of the ",
                plan.points.size(), " points of ", spec.file, " (first: ", first_missing,
                "): replay needs an exhaustive sweep of the same spec");
  if (without_samples)
    input_error(db_path, ": ", without_samples, " of its ", plan.points.size(), " points of ",
                spec.file,
                " hold no samples (rows stored before schema v5 keep only their summary): "
                "measure them again with this build");

  Progress silent = Progress::silent();
  DecideOptions opt;
  opt.tie_tolerance = spec.decide.tie_tolerance;
  opt.ties = spec.decide.ties;
  for (const std::string& b : order) {
    const std::vector<HalvingPoint>& pts = points.at(b);
    const std::vector<StoredPair>& st = stored.at(b);
    ReplaySampler sampler(st), ex_sampler(st);
    const HalvingOutcome o = halving_rounds(spec, pts, {}, sampler, silent);
    HalvingReplayBucket rb;
    rb.bucket = b;
    rb.rounds = o.rounds;
    rb.halving = sampler.use;
    const std::vector<PairRow> ex = replay_exhaustive(spec, pts, ex_sampler);
    rb.exhaustive = ex_sampler.use;
    std::vector<PairRow> hv;
    std::set<std::string> configs;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const HalvingSide& mac = o.mac.at(i);
      const HalvingSide& full = *o.full_of(pts, i);
      PairRow r = halving_pair_row(pts[i], mac.side.time, full.side.time);
      r.mac_partial = !mac.final;
      r.full_partial = !full.final;
      rb.partial_rows += r.mac_partial + r.full_partial;
      hv.push_back(r);
      configs.insert(r.mac_config.id());
    }
    rb.configs = configs.size();
    const std::vector<BucketDecision> dh = decide(hv, opt), de = decide(ex, opt);
    MACTUNE_CHECK(dh.size() == 1 && de.size() == 1, "replay: one bucket decides ", dh.size(), " / ",
                  de.size(), " buckets");
    rb.halving_mac = dh[0].mac;
    rb.halving_full = dh[0].full;
    rb.exhaustive_mac = de[0].mac;
    rb.exhaustive_full = de[0].full;
    rb.mac = agreement_of(rb.halving_mac, rb.exhaustive_mac);
    for (const Choice& c : de[0].mac_candidates)
      if (same_config(c.config, rb.halving_mac.config) && rb.exhaustive_mac.score > 0)
        rb.mac_cost = c.score / rb.exhaustive_mac.score - 1;
    rb.full = agreement_of(rb.halving_full, rb.exhaustive_full);
    out.mac_agree += rb.mac != PickAgreement::differs;
    out.full_agree += rb.full != PickAgreement::differs;
    out.halving += rb.halving;
    out.exhaustive += rb.exhaustive;
    out.halving_rows.insert(out.halving_rows.end(), hv.begin(), hv.end());
    out.buckets.push_back(std::move(rb));
  }
  return out;
}

std::string halving_replay_report(const HalvingReplayResult& r) {
  std::ostringstream o;
  o << "# halving replayed over " << r.db_path << "\n\n"
    << "device " << r.device << "; the samples of an exhaustive sweep, taken in their stored "
    << "order; sampling time = samples taken + warm-up runs (each at its case's median)\n\n"
    << "| bucket | configs | rounds (MAC configs) | halving's MAC pick | exhaustive's MAC pick "
       "| MAC | halving's pick by exhaustive's rows | full | sampling halving / exhaustive |\n"
    << "|---|---:|---|---|---|---|---:|---|---:|\n";
  for (const HalvingReplayBucket& b : r.buckets) {
    std::string rounds;
    for (const HalvingRoundTrace& t : b.rounds)
      rounds +=
          (rounds.empty() ? std::to_string(t.mac_before) : "") +
          (t.samples ? " -(" + std::to_string(t.samples) + ")-> " + std::to_string(t.mac_after)
                     : " final");
    o << "| " << b.bucket << " | " << b.configs << " | " << rounds << " | "
      << config_label(b.halving_mac) << " | " << config_label(b.exhaustive_mac) << " | "
      << name_of(b.mac) << " | " << std::showpos << std::fixed << std::setprecision(1)
      << 100 * b.mac_cost << std::noshowpos << "% | " << name_of(b.full) << " | "
      << std::setprecision(3) << b.halving.seconds << " / " << b.exhaustive.seconds << " s ("
      << std::setprecision(0) << percent(b.halving.seconds, b.exhaustive.seconds) << "%) |\n";
  }
  const std::size_t n = r.buckets.size();
  o << "\nreplay: " << n << " buckets: MAC picks agree in " << r.mac_agree << " of " << n
    << ", full picks in " << r.full_agree << " of " << n << " (same or in the tie set); sampling "
    << std::fixed << std::setprecision(3) << r.halving.seconds << " s of exhaustive's "
    << r.exhaustive.seconds << " s = " << std::setprecision(1)
    << percent(r.halving.seconds, r.exhaustive.seconds) << "% (" << r.halving.samples << " of "
    << r.exhaustive.samples << " samples)\n";
  double worst = 0, mean = 0;
  for (const HalvingReplayBucket& b : r.buckets) {
    worst = std::max(worst, b.mac_cost);
    mean += b.mac_cost / static_cast<double>(std::max<std::size_t>(n, 1));
  }
  o << "halving's MAC picks cost " << std::setprecision(1) << 100 * mean << "% on average, "
    << 100 * worst << "% at most, by exhaustive's rows (score over the best score)\n";
  // Where the stored samples did not reach: the replay is faithful only up to them.
  if (r.halving.short_cases)
    o << "short: halving ran past the stored samples of " << r.halving.short_cases << " cases ("
      << r.halving.missing_samples
      << " samples of brief rounds missing, costed at their case's median, ranked without); a "
         "database measured deeper (min_samples as high as the last brief round) replays it "
         "whole\n";
  if (r.exhaustive.short_cases)
    o << "short: the spec's stopping rule ran past the stored samples of "
      << r.exhaustive.short_cases
      << " cases (rows the time cap stopped, or a database measured to a shallower rule)\n";
  return o.str();
}

}  // namespace mactune::tuner
