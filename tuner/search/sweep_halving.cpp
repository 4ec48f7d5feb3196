// `search: halving` over the points of one bucket, live: every case built once and kept while
// its config is alive, the rounds of tuner/search/halving_rounds.h sampling them with
// measure_group. Every point is stored at the end, in one transaction: its last measurement,
// partial unless it was in the final round.
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>

#include "kernels/error.h"
#include "tuner/search/halving_rounds.h"
#include "tuner/search/sweep_parts.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner::sweep_parts {
namespace {

class Halving final : public HalvingSampler {
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
    for (std::size_t i : runnable_) {
      const auto [mac_name, full_name] = ctx_.backend.instance_names(point(i));
      points_.push_back({&point(i), mac_name, full_name});
    }
    const std::map<std::size_t, std::string> failed = build_cases();
    const HalvingOutcome out = halving_rounds(ctx_.spec, points_, failed, *this, ctx_.progress);
    store(out, started);
  }

  SampledGroup sample(std::span<const HalvingCase> cases, const MeasurePolicy& policy,
                      double time_cap, std::span<const std::vector<double>> prior) override {
    std::vector<Case*> c;
    for (const HalvingCase& h : cases)
      c.push_back(
          h.mac
              ? macs_.at(h.point).get()
              : fulls_.at(full_key(*points_[h.point].point, points_[h.point].full_instance)).get());
    SampledGroup s;
    s.result = measure_group(ctx_.backend, c, policy, time_cap, ctx_.stop, prior);
    ctx_.counts.measuring_seconds += s.result.wall_seconds;
    s.notes = group_notes(ctx_.backend, s.result, c.size());
    return s;
  }

  void dropped(std::size_t k) override { macs_.erase(k); }  // frees the case

 private:
  const TunePoint& point(std::size_t i) const { return *pending_[i].point; }

  // Every case, built once and kept while its config is alive; the points whose cases could
  // not be built, with why (indices into points_).
  std::map<std::size_t, std::string> build_cases() {
    std::map<std::size_t, std::string> failed;
    for (std::size_t k = 0; k < points_.size(); ++k) {
      const TunePoint& p = *points_[k].point;
      const std::string fk = full_key(p, points_[k].full_instance);
      try {
        if (!fulls_[fk]) fulls_[fk] = ctx_.backend.make_case(p, false, point_seed(ctx_.spec, p));
        macs_[k] = ctx_.backend.make_case(p, true, point_seed(ctx_.spec, p));
      } catch (const Error& e) {
        failed[k] = e.what();
      }
    }
    return failed;
  }

  // Every point: its last MAC measurement and its baseline's last one at its condition.
  void store(const HalvingOutcome& out, const std::string& started) {
    std::vector<db::Measurement> rows;
    std::vector<std::string> lines;
    for (std::size_t k = 0; k < points_.size(); ++k) {
      const PendingPoint& pp = pending_[runnable_[k]];
      const TunePoint& p = *pp.point;
      const auto mit = out.mac.find(k);
      const HalvingSide* full_side = out.full_of(points_, k);
      if (out.failed.count(k) || mit == out.mac.end() || !full_side) {
        ctx_.fail(pp, started, out.failed.count(k) ? out.failed.at(k) : "not measured");
        continue;
      }
      const HalvingSide& mac = mit->second;
      const HalvingSide& full = *full_side;
      db::Measurement mm = row(pp.mac, ctx_.run_id, started);
      db::Measurement mf = row(pp.full, ctx_.run_id, started);
      for (auto [m, l] : {std::pair{&mm, &mac}, std::pair{&mf, &full}}) {
        m->stats = l->side.time;
        m->samples = l->side.samples;
        m->stop_reason = l->side.stop;
        m->modeled_bytes = static_cast<double>(l->side.stats.modeled_bytes());
        m->clock_mhz = l->clock.mhz;
        m->throttled_samples = l->clock.throttled_samples;
        m->partial = !l->final;
        m->kv_tokens_read = l->side.stats.kv_tokens_read;
        m->kv_tokens_total = l->side.stats.kv_tokens_total;
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
  std::vector<std::size_t> runnable_;  // pending indices; points_[k] is pending_[runnable_[k]]
  std::vector<HalvingPoint> points_;
  std::map<std::string, std::unique_ptr<Case>> fulls_;
  std::map<std::size_t, std::unique_ptr<Case>> macs_;  // by index into points_
};

}  // namespace

void halving_bucket(SweepContext& ctx, const std::vector<PendingPoint>& pending,
                    const std::vector<std::size_t>& members) {
  Halving(ctx, pending).run(members);
}

}  // namespace mactune::tuner::sweep_parts
