#include "tuner/search/dry_run.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

#include "kernels/error.h"
#include "tuner/decide/store_io.h"
#include "tuner/measure/measure.h"
#include "tuner/measure/progress.h"

namespace mactune::tuner {
namespace {

// The timer a CUDA run would use, without the GPU.
Timer cuda_timer(const Spec& spec) {
  const std::optional<Timer> t = spec.measure.timer;
  if (!t) return Timer::cuda_events;
  if (*t == Timer::steady_clock)
    input_error(spec.file, ": measure.timer: timer '", name_of(*t),
                "' is not a GPU timer (cuda_events or cupti)");
  return *t;
}

// "2026-12-01T08:27:14.123Z" -> seconds since the epoch; NaN when it does not parse.
double utc_seconds(const std::string& iso) {
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(iso.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) < 6)
    return std::nan("");
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + ms * 1e-3;
}

bool matches_spec(const SweepPlan& plan, const DeviceFingerprint& d) {
  return d.backend == plan.backend && glob_match(plan.spec.device.name, d.name);
}

// When the device's latest measurement finished ("" when it has none).
std::string last_measured(const db::Store& s, db::Id device_id) {
  auto q = s.connection().prepare(
      "SELECT COALESCE(MAX(finished_at), '') FROM measurements WHERE device_id = ?1");
  q.bind(1, device_id);
  return q.step() ? q.text(0) : std::string();
}

std::optional<db::Id> find_build(const db::Store& s, const db::BuildInfo& b) {
  auto q = s.connection().prepare(
      "SELECT id FROM builds WHERE git_revision = ?1 AND compiler = ?2 AND registry_hash = ?3");
  q.bind(1, b.git_revision).bind(2, b.compiler).bind(3, b.registry_hash);
  if (!q.step()) return std::nullopt;
  return q.int64(0);
}

// "0.4s" below ten seconds (tiny test sweeps), else "3m05s", "1h02m".
std::string duration(double s) {
  if (s >= 10) return Progress::format_duration(s);
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << s << 's';
  return o.str();
}

using PointName = std::tuple<std::string, std::string, std::string>;  // instance, params, workload

}  // namespace

SweepPlan plan_sweep(const std::string& spec_path, std::optional<BackendRequest> backend) {
  const std::string text = read_spec_file(spec_path);
  const BackendRequest requested = backend ? *backend : requested_backend(text, spec_path);
  std::unique_ptr<MeasureBackend> b;
  std::string why;
  if (requested == Backend::cuda)
    b = make_cuda_backend(&why);  // null without a usable GPU: planned from the registry
  else
    b = make_backend(requested);
  SweepPlan plan;
  plan.backend = b ? b->kind() : Backend::cuda;
  plan.spec = parse_spec(text, spec_path, plan.backend);
  plan.points = expand_grid(plan.spec, &plan.unreachable);
  plan.cold = plan.spec.measure.mode == CacheMode::cold;
  plan.names.reserve(plan.points.size());
  if (b) {
    try {
      b->use_timer(plan.spec.measure.timer);
    } catch (const InputError& e) {
      input_error(plan.spec.file, ": measure.timer: ", e.what());
    }
    plan.policy = name_of(b->timer());
    plan.build = current_build(*b);
    const DeviceFingerprint d = b->device();
    if (glob_match(plan.spec.device.name, d.name))
      plan.here = d;
    else
      plan.not_here =
          "this machine's " + std::string(name_of(d.backend)) + " device is '" + d.name + "'";
    for (const TunePoint& p : plan.points) plan.names.push_back(b->instance_names(p));
  } else {
    plan.not_here = why;
    plan.policy = name_of(cuda_timer(plan.spec));
    plan.build = current_build(cuda_build_instances());
    for (const TunePoint& p : plan.points) plan.names.push_back(cuda_instance_names(p));
  }
  return plan;
}

StoredPoints stored_points(const SweepPlan& plan, const std::string& db_path) {
  StoredPoints out;
  out.state.assign(plan.points.size(), Stored::no);
  if (!std::filesystem::exists(db_path)) {
    out.note = db_path + " does not exist yet";
    return out;
  }
  const db::Store s = db::Store::open(db_path, {.mode = db::OpenMode::read_only});
  const std::vector<db::DeviceRow> devices = s.devices();
  const db::DeviceRow* chosen = nullptr;
  std::string chosen_last;
  for (const db::DeviceRow& d : devices) {
    if (!matches_spec(plan, d.fingerprint)) continue;
    if (plan.here && d.fingerprint.key() == plan.here->key()) {
      chosen = &d;
      break;
    }
    const std::string last = last_measured(s, d.id);
    if (!chosen || last > chosen_last) chosen = &d, chosen_last = last;
  }
  if (!chosen) {
    out.note = db_path + " holds no measurements of a " + std::string(name_of(plan.backend)) +
               " device matching '" + plan.spec.device.name + "'";
    return out;
  }
  out.device = chosen->digest + " " + chosen->fingerprint.name;
  if (plan.here && chosen->fingerprint.key() != plan.here->key())
    out.note = "the stored rows are of " + out.device +
               ", not of this machine's device: a run here measures every point again";
  const auto build = find_build(s, plan.build);
  if (!build) {
    out.note = db_path + " holds no measurements of this build (" + plan.build.git_revision +
               "): every point is measured again";
    return out;
  }
  db::MeasurementFilter f;
  f.device_id = chosen->id;
  f.build_id = *build;
  f.policy = plan.policy;
  f.cold = plan.cold;
  f.ok_only = false;
  std::map<PointName, db::PointStatus> by_name;
  for (const db::MeasurementRow& r : s.measurements(f))
    by_name[{r.instance.name, r.m.point.params, r.workload.key()}] = r.m.status;
  for (std::size_t i = 0; i < plan.points.size(); ++i) {
    const TunePoint& p = plan.points[i];
    const std::string params = p.launch_text(), workload = to_db_workload(p).key();
    const auto mac = by_name.find({plan.names[i].first, params, workload});
    const auto full = by_name.find({plan.names[i].second, params, workload});
    if (mac == by_name.end() || full == by_name.end()) continue;
    const bool failed =
        mac->second == db::PointStatus::failed || full->second == db::PointStatus::failed;
    out.state[i] = failed ? Stored::failed : Stored::ok;
  }
  return out;
}

PointTimes point_times(const SweepPlan& plan, const std::vector<std::string>& db_paths) {
  PointTimes out;
  out.seconds.assign(plan.points.size(), std::nullopt);
  out.source.assign(plan.points.size(), 0);
  std::map<PointName, double> by_point;
  std::map<std::string, std::pair<double, int>> by_bucket;  // sum, count
  std::vector<double> all;
  for (const std::string& path : db_paths) {
    if (!std::filesystem::exists(path)) continue;
    const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
    std::size_t found = 0;
    for (const db::DeviceRow& d : s.devices()) {
      if (!matches_spec(plan, d.fingerprint)) continue;
      db::MeasurementFilter f;
      f.device_id = d.id;
      f.family = Family::mac;
      const auto rows = s.measurements(f);
      // Points measured together (one interleave group) share their run and start time.
      std::map<std::pair<db::Id, std::string>, int> group_size;
      for (const auto& r : rows) ++group_size[{r.m.run_id, r.m.started_at}];
      for (const auto& r : rows) {
        const double wall = utc_seconds(r.m.finished_at) - utc_seconds(r.m.started_at);
        if (!(wall >= 0)) continue;
        const double t = wall / group_size[{r.m.run_id, r.m.started_at}];
        by_point[{r.instance.name, r.m.point.params, r.workload.key()}] = t;
        auto& b = by_bucket[bucket_of(r.workload).key()];
        b.first += t;
        ++b.second;
        all.push_back(t);
        ++found;
      }
    }
    if (found) out.databases.push_back(path);
    out.rows += found;
  }
  if (all.empty()) return out;
  std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
  const double median = all[all.size() / 2];
  for (std::size_t i = 0; i < plan.points.size(); ++i) {
    const TunePoint& p = plan.points[i];
    if (const auto it =
            by_point.find({plan.names[i].first, p.launch_text(), to_db_workload(p).key()});
        it != by_point.end()) {
      out.seconds[i] = it->second;
      out.source[i] = 'p';
    } else if (const auto b = by_bucket.find(bucket_of(p).key()); b != by_bucket.end()) {
      out.seconds[i] = b->second.first / b->second.second;
      out.source[i] = 'b';
    } else {
      out.seconds[i] = median;
      out.source[i] = 'm';
    }
  }
  return out;
}

ShardEstimate estimate_shard(const SweepPlan& plan, const std::vector<Stored>& state,
                             const PointTimes& times, int shard, int count, bool retry_failed) {
  MACTUNE_CHECK(count >= 1 && shard >= 0 && shard < count, "shard ", shard, " of ", count);
  ShardEstimate e;
  e.shard = shard;
  e.count = count;
  double expected = 0;
  bool timed = false;
  for (std::size_t i = 0; i < plan.points.size(); ++i) {
    if (plan.points[i].index % static_cast<std::size_t>(count) != static_cast<std::size_t>(shard))
      continue;
    ++e.points;
    if (state[i] == Stored::ok || (state[i] == Stored::failed && !retry_failed)) {
      ++e.stored;
      continue;
    }
    ++e.to_measure;
    e.cap_bound_s += plan.spec.measure.stop.time_cap;
    if (times.seconds[i]) {
      timed = true;
      expected += *times.seconds[i];
      e.timed_by_point += times.source[i] == 'p';
      e.timed_by_bucket += times.source[i] == 'b';
      e.timed_by_median += times.source[i] == 'm';
    }
  }
  if (timed || (e.to_measure == 0 && times.rows > 0)) e.expected_s = expected;
  return e;
}

std::string describe_time(const ShardEstimate& e, const SweepPlan& plan) {
  if (e.to_measure == 0) return "nothing to measure";
  std::ostringstream o;
  o << "<= " << duration(e.cap_bound_s) << " by the time caps (" << e.to_measure << " points x "
    << plan.spec.measure.stop.time_cap << " s)";
  if (e.expected_s) {
    o << "; about " << duration(*e.expected_s) << " from earlier runs (";
    const char* sep = "";
    for (auto [n, what] : {std::pair{e.timed_by_point, "as themselves"},
                           std::pair{e.timed_by_bucket, "by their bucket"},
                           std::pair{e.timed_by_median, "by the median point"}})
      if (n) o << sep << n << " timed " << what, sep = ", ";
    o << ")";
  }
  return o.str();
}

}  // namespace mactune::tuner
