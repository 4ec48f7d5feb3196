#include "tuner/search/sweep.h"

#include <array>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "profiler/nvtx.h"
#include "tuner/search/sweep_parts.h"
#include "tuner/spec/axes.h"
#include "tuner/spec/expr.h"
#include "tuner/spec/skip_ratio.h"

namespace mactune::tuner {
namespace sweep_parts {

std::string ms(double seconds) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(seconds < 1e-3 ? 3 : 2) << seconds * 1e3 << " ms";
  return o.str();
}

// The seed of a point's synthetic data: one per bucket, so both sides of a point, and every
// config of one shape, run over the same KV cache and queries.
std::uint64_t point_seed(const Spec& spec, const TunePoint& p) {
  const std::string h = db::fnv1a_hex(bucket_of(p).key());
  return spec.seed * 0x9e3779b97f4a7c15ull ^ std::stoull(h, nullptr, 16);
}

// The baseline case of a point: one per shape, launch config and full instance (shared by its
// hit rates and MAC settings, and kept alive across consecutive groups that use it).
std::string full_key(const MeasureBackend& backend, const TunePoint& p) {
  return full_key(p, backend.instance_names(p).second);
}
std::string full_key(const TunePoint& p, const std::string& full_instance) {
  return bucket_of(p).key() + "|" + p.launch_text() + "|" + full_instance;
}

// The points measured interleaved in bucket mode: one bucket at one forced-hit workload.
std::string group_key(const TunePoint& p) {
  return bucket_of(p).key() + "|" + fields_text(p.forced);
}

db::Measurement row(const db::PointKey& key, db::Id run_id, const std::string& started) {
  db::Measurement m;
  m.point = key;
  m.run_id = run_id;
  m.started_at = started;
  m.finished_at = db::now_utc();
  return m;
}

std::string group_notes(const MeasureBackend& backend, const GroupResult& r, std::size_t cases) {
  std::ostringstream notes;
  notes << "timer=" << name_of(backend.timer()) << "; clock: " << r.clock.note
        << "; interleaved=" << cases << "; disturbed=" << r.clock.throttled_samples
        << " (discarded " << r.discarded << ")"
        << "; wall_s=" << format_number(std::round(r.wall_seconds * 1000) / 1000);
  return notes.str();
}

}  // namespace sweep_parts

namespace {

using namespace sweep_parts;

class Sweeper {
 public:
  Sweeper(MeasureBackend& b, db::Store& s, const Spec& spec, db::Id run, Progress& pr,
          const std::atomic<bool>* stop)
      : backend_(b), store_(s), spec_(spec), run_id_(run), progress_(pr), stop_(stop) {}

  void group(const std::vector<PendingPoint>& pending, std::vector<std::size_t> members) {
    std::vector<std::size_t> runnable;
    for (std::size_t i : members) {
      const std::string why = backend_.can_run(*pending[i].point);
      if (why.empty())
        runnable.push_back(i);
      else
        fail(pending[i], db::now_utc(), why);
    }
    if (runnable.size() > 1 && !fits_in_memory(pending, runnable)) {
      progress_.note("mactune: the configs of " + bucket_of(*pending[runnable[0]].point).key() +
                     " do not fit in memory together: measuring them point by point");
      for (std::size_t i : runnable) measure(pending, {i});
    } else if (!runnable.empty()) {
      measure(pending, runnable);
    }
  }

  SweepCounts counts;

  // What the halving search (tuner/search/sweep_halving.cpp) uses of this sweep.
  sweep_parts::SweepContext context() {
    return {backend_,
            store_,
            spec_,
            run_id_,
            progress_,
            stop_,
            counts,
            [this](const PendingPoint& p, const std::string& started, const std::string& why) {
              fail(p, started, why);
            },
            [this](const std::vector<PendingPoint>& pending, const std::vector<std::size_t>& g) {
              return fits_in_memory(pending, g);
            },
            [this](const std::vector<PendingPoint>& pending, std::vector<std::size_t> g) {
              group(pending, std::move(g));
            },
            [this] { fulls_.clear(); }};
  }

 private:
  bool fits_in_memory(const std::vector<PendingPoint>& pending, const std::vector<std::size_t>& g) {
    std::set<std::string> fulls;
    double bytes = 0;
    for (std::size_t i : g) {
      const TunePoint& p = *pending[i].point;
      bytes += backend_.case_bytes(p, true);
      if (fulls.insert(full_key(backend_, p)).second) bytes += backend_.case_bytes(p, false);
    }
    const double have = backend_.memory_available();
    return have <= 0 || bytes <= 0.8 * have;
  }

  void measure(const std::vector<PendingPoint>& pending, const std::vector<std::size_t>& g) {
    const TunePoint& first = *pending[g[0]].point;
    const std::string label = g.size() == 1
                                  ? point_label(first)
                                  : "b=" + std::to_string(first.shape.batch) +
                                        " ctx=" + std::to_string(first.context) + " " +
                                        quota_label(first.forced) + " (" +
                                        std::to_string(g.size()) + " configs interleaved)";
    progress_.begin(label);
    prof::NvtxRange range("tune " + bucket_of(first).key() + " " + label,
                          static_cast<std::int64_t>(first.index));
    const std::string started = db::now_utc();
    // Free the baseline cases this group does not use before building anything.
    std::set<std::string> keys;
    for (std::size_t i : g) keys.insert(full_key(backend_, *pending[i].point));
    std::erase_if(fulls_, [&](const auto& kv) { return !keys.count(kv.first); });

    std::map<std::size_t, std::string> failed;       // member -> why
    std::map<std::string, std::string> failed_full;  // baseline key -> why
    std::map<std::size_t, std::unique_ptr<Case>> macs;
    for (std::size_t i : g) {
      const TunePoint& p = *pending[i].point;
      const std::string fk = full_key(backend_, p);
      try {
        if (!failed_full.count(fk) && !fulls_[fk])
          fulls_[fk] = backend_.make_case(p, false, point_seed(spec_, p));
      } catch (const Error& e) {
        failed_full[fk] = e.what();
        fulls_.erase(fk);
      }
      try {
        if (!failed_full.count(fk)) macs[i] = backend_.make_case(p, true, point_seed(spec_, p));
      } catch (const Error& e) {
        failed[i] = e.what();
      }
    }
    for (std::size_t i : g)
      if (const auto it = failed_full.find(full_key(backend_, *pending[i].point));
          it != failed_full.end())
        failed[i] = it->second;
    // The cases in order: each member's baseline (at its first use), then its MAC side.
    std::vector<Case*> cases;
    std::map<std::string, std::size_t> full_at;
    std::map<std::size_t, std::size_t> mac_at;
    for (std::size_t i : g) {
      if (failed.count(i)) continue;
      const std::string fk = full_key(backend_, *pending[i].point);
      if (!full_at.count(fk) && fulls_.count(fk)) {
        full_at[fk] = cases.size();
        cases.push_back(fulls_.at(fk).get());
      }
      mac_at[i] = cases.size();
      cases.push_back(macs.at(i).get());
    }
    GroupResult r;
    if (!cases.empty()) {
      const double cap = spec_.measure.stop.time_cap * static_cast<double>(mac_at.size());
      try {
        r = measure_group(backend_, cases, spec_.measure, cap, stop_);
        counts.measuring_seconds += r.wall_seconds;
      } catch (const Error& e) {
        for (const auto& [i, at] : mac_at) failed[i] = e.what();
        fulls_.clear();
      }
    }
    for (std::size_t i : g) {
      if (failed.count(i)) {
        fail(pending[i], started, failed.at(i));
        continue;
      }
      const TunePoint& p = *pending[i].point;
      const SideResult& mac = r.sides.at(mac_at.at(i));
      const SideResult& full = r.sides.at(full_at.at(full_key(backend_, p)));
      const auto [mac_name, full_name] = backend_.instance_names(p);
      MACTUNE_CHECK(mac.instance == mac_name && full.instance == full_name, "instance names ",
                    mac.instance, " / ", full.instance, " differ from the predicted ", mac_name,
                    " / ", full_name);
      db::Measurement mm = row(pending[i].mac, run_id_, started);
      db::Measurement mf = row(pending[i].full, run_id_, started);
      const std::string notes = group_notes(backend_, r, cases.size());
      for (auto [m, side] : {std::pair{&mm, &mac}, std::pair{&mf, &full}}) {
        m->stats = side->time;
        m->samples = side->samples;
        m->stop_reason = side->stop;
        m->modeled_bytes = static_cast<double>(side->stats.modeled_bytes());
        m->clock_mhz = r.clock.mhz;
        m->throttled_samples = r.clock.throttled_samples;
        m->kv_tokens_read = side->stats.kv_tokens_read;
        m->kv_tokens_total = side->stats.kv_tokens_total;
        m->notes = notes + "; skip_ratio=" +
                   format_number(std::round(side->stats.skip_ratio() * 1e4) / 1e4);
      }
      // The pair in one transaction: a kill cannot leave a MAC row without its baseline.
      store_.record_measurements(std::array{mf, mm});
      ++counts.measured;
      const double speedup = mac.time.median_s > 0 ? full.time.median_s / mac.time.median_s : 0;
      std::ostringstream o;
      o << point_label(p) << ": mac " << ms(mac.time.median_s) << " (n=" << mac.time.samples << ", "
        << std::fixed << std::setprecision(1) << mac.time.rel_noise * 100 << "%), full "
        << ms(full.time.median_s) << " (n=" << full.time.samples << ", "
        << full.time.rel_noise * 100 << "%), " << std::setprecision(2) << speedup << "x";
      progress_.end(o.str(), true);
    }
  }

  void fail(const PendingPoint& pp, const std::string& started, const std::string& why) {
    db::Measurement mm = row(pp.mac, run_id_, started);
    db::Measurement mf = row(pp.full, run_id_, started);
    mm.status = mf.status = db::PointStatus::failed;
    mm.error = mf.error = why;
    store_.record_measurements(std::array{mf, mm});
    ++counts.failed;
    progress_.end(point_label(*pp.point) + ": failed: " + why, false);
  }

  MeasureBackend& backend_;
  db::Store& store_;
  const Spec& spec_;
  db::Id run_id_;
  Progress& progress_;
  const std::atomic<bool>* stop_;
  std::map<std::string, std::unique_ptr<Case>> fulls_;
};

}  // namespace

std::string point_label(const TunePoint& p) {
  std::ostringstream o;
  o << "b=" << p.shape.batch << " ctx=" << p.context << " " << quota_label(p.forced)
    << " K=" << p.mac.ring_capacity << " r=" << p.mac.band;
  if (const std::string launch = p.launch_text(); !launch.empty()) o << ' ' << launch;
  return o.str();
}

std::vector<std::vector<std::size_t>> interleave_groups(const std::vector<PendingPoint>& pending,
                                                        Interleave mode) {
  std::vector<std::vector<std::size_t>> groups;
  std::map<std::string, std::size_t> by_key;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    if (mode == Interleave::point) {
      groups.push_back({i});
      continue;
    }
    const auto [it, fresh] = by_key.try_emplace(group_key(*pending[i].point), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

SweepCounts sweep(MeasureBackend& backend, db::Store& store, const Spec& spec, db::Id run_id,
                  const std::vector<PendingPoint>& pending, Progress& progress,
                  const std::atomic<bool>* stop) {
  Sweeper s(backend, store, spec, run_id, progress, stop);
  if (spec.search.strategy == SearchStrategy::halving) {
    // One group per bucket, in grid order of its first point.
    std::vector<std::vector<std::size_t>> buckets;
    std::map<std::string, std::size_t> at;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      const auto [it, fresh] = at.try_emplace(bucket_of(*pending[i].point).key(), buckets.size());
      if (fresh) buckets.emplace_back();
      buckets[it->second].push_back(i);
    }
    sweep_parts::SweepContext ctx = s.context();
    for (const auto& b : buckets) sweep_parts::halving_bucket(ctx, pending, b);
  } else {
    for (const auto& g : interleave_groups(pending, spec.measure.interleave)) s.group(pending, g);
  }
  return s.counts;
}

}  // namespace mactune::tuner
