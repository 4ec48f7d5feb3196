#include "tuner/tune.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>

#include "db/store.h"
#include "kernels/error.h"
#include "profiler/nvtx.h"
#include "tuner/emit.h"
#include "tuner/expr.h"
#include "tuner/measure.h"
#include "tuner/report.h"
#include "tuner/spec.h"
#include "tuner/store_io.h"

namespace mactune::tuner {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) input_error(path, ": cannot open the spec file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string hostname() {
  char buf[256] = {};
  return gethostname(buf, sizeof(buf) - 1) == 0 ? std::string(buf) : std::string();
}

std::string ms(double seconds) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(seconds < 1e-3 ? 3 : 2) << seconds * 1e3 << " ms";
  return o.str();
}

std::string point_label(const TunePoint& p) {
  std::ostringstream o;
  o << "b=" << p.shape.batch << " ctx=" << p.context << " hit=" << format_number(p.forced.hit_rate)
    << " K=" << p.mac.ring_capacity << " r=" << p.mac.band;
  if (!p.launch.empty()) o << ' ' << p.launch_text();
  return o.str();
}

db::TimeStats time_stats(const SideResult& s) {
  db::TimeStats t;
  t.samples = s.time.samples;
  t.median_s = s.time.median;
  t.q1_s = s.time.q1;
  t.q3_s = s.time.q3;
  t.min_s = s.time.min;
  t.max_s = s.time.max;
  t.mean_s = s.time.mean;
  t.rel_noise = s.time.noise;
  t.stop_reason = std::string(stop_reason_name(s.stop));
  return t;
}

// The seed of a point's synthetic data: one per bucket, so both sides of a point, and every
// config of one shape, run over the same KV and queries.
std::uint64_t point_seed(const Spec& spec, const TunePoint& p) {
  const std::string h = db::fnv1a_hex(bucket_of(p).key());
  return spec.seed * 0x9e3779b97f4a7c15ull ^ std::stoull(h, nullptr, 16);
}

struct PointIds {
  db::Id workload = 0, mac_instance = 0, full_instance = 0;
  db::PointKey mac, full;
};

InstanceInfo instance_info(const Backend& b, const std::string& name, bool mac) {
  for (const InstanceInfo& i : b.instances())
    if (i.name == name) return i;
  return {name, b.name(), mac ? "mac" : "full", ""};  // not runnable here: a failed point
}

}  // namespace

TuneResult run_tune(const TuneOptions& opt, Progress& progress, const std::atomic<bool>* stop) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string text = read_file(opt.spec_path);
  const std::string requested =
      opt.backend.empty() ? requested_backend(text, opt.spec_path) : opt.backend;
  std::unique_ptr<Backend> backend = make_backend(requested);
  const Spec spec = parse_spec(text, opt.spec_path, backend->name());
  const DeviceFingerprint here = backend->device();
  if (!glob_match(spec.device.name, here.name))
    input_error(spec.file, ':', spec.device.line, ": device.name: '", spec.device.name,
                "' does not match this machine's ", here.backend, " device '", here.name, "'");
  std::vector<TunePoint> points = expand_grid(spec);
  if (opt.shard) points = shard_points(points, opt.shard->first, opt.shard->second);

  TuneResult res;
  res.points = points.size();
  res.db_path = opt.db_path.empty() ? spec.output.db : opt.db_path;
  res.dispatch_path = opt.dispatch_path.empty() ? spec.output.dispatch : opt.dispatch_path;
  res.report_dir = opt.report_dir.empty() ? spec.output.report : opt.report_dir;
  const std::string header_path = opt.header_path.empty() ? spec.output.header : opt.header_path;
  try {
    backend->use_timer(spec.measure.timer);
  } catch (const InputError& e) {
    input_error(spec.file, ": measure.timer: ", e.what());
  }
  const std::string policy = backend->timer_name();
  const bool cold = spec.measure.mode == CacheMode::cold;

  if (opt.dry_run && !std::filesystem::exists(res.db_path)) {
    for (const TunePoint& p : points)
      res.point_lines.push_back(std::to_string(p.index) + "  " + bucket_of(p).key() + "  " +
                                point_label(p) + "  " + backend->instance_names(p).first +
                                "  to measure");
    return res;
  }
  if (const auto dir = std::filesystem::path(res.db_path).parent_path(); !dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) input_error(res.db_path, ": cannot create its directory: ", ec.message());
  }
  db::Store store = db::Store::open(res.db_path);
  const db::Id device_id = store.upsert_device(here);
  const db::Id build_id = store.upsert_build(current_build(*backend));

  // Keys and stored state of every point first: the progress bar knows what is left.
  std::vector<PointIds> ids(points.size());
  std::vector<bool> todo(points.size(), true);
  for (std::size_t i = 0; i < points.size(); ++i) {
    const TunePoint& p = points[i];
    const auto [mac_name, full_name] = backend->instance_names(p);
    PointIds& k = ids[i];
    k.workload = store.upsert_workload(to_db_workload(p));
    k.mac_instance = store.upsert_instance(instance_info(*backend, mac_name, true));
    k.full_instance = store.upsert_instance(instance_info(*backend, full_name, false));
    k.mac = {device_id, build_id, k.mac_instance, p.launch_text(), k.workload, policy, cold};
    k.full = k.mac;
    k.full.instance_id = k.full_instance;
    const auto sm = store.point_status(k.mac), sf = store.point_status(k.full);
    const bool failed = sm == db::PointStatus::failed || sf == db::PointStatus::failed;
    todo[i] = !sm || !sf || (failed && opt.retry_failed);
    if (!todo[i]) ++res.stored;
    if (opt.dry_run)
      res.point_lines.push_back(std::to_string(p.index) + "  " + bucket_of(p).key() + "  " +
                                point_label(p) + "  " + mac_name + "  " +
                                (todo[i]  ? "to measure"
                                 : failed ? "stored (failed)"
                                          : "stored"));
  }
  if (opt.dry_run) return res;

  db::RunInfo run;
  run.spec_text = spec.text;
  run.shard_index = opt.shard ? opt.shard->first : 0;
  run.shard_count = opt.shard ? opt.shard->second : 1;
  run.device_id = device_id;
  run.build_id = build_id;
  run.host = hostname();
  run.command = opt.command;
  const db::Id run_id = store.begin_run(run);

  progress.start(points.size(), res.stored);
  std::string full_key;  // the cached baseline case serves consecutive points of one shape
  std::unique_ptr<Case> full_case;
  try {
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (!todo[i]) continue;
      const TunePoint& p = points[i];
      const PointIds& k = ids[i];
      const std::string label = point_label(p);
      progress.begin(label);
      prof::NvtxRange range("tune " + bucket_of(p).key() + " " + label,
                            static_cast<std::int64_t>(p.index));
      db::Measurement mm, mf;
      mm.point = k.mac;
      mf.point = k.full;
      mm.run_id = mf.run_id = run_id;
      mm.started_at = mf.started_at = db::now_utc();
      std::string why = backend->can_run(p);
      PairResult r;
      if (why.empty()) {
        try {
          const std::uint64_t seed = point_seed(spec, p);
          const std::string fk = bucket_of(p).key() + "|" + p.launch_text() + "|" + p.isa;
          if (fk != full_key || !full_case) {
            full_case.reset();  // free its memory before the next one is built
            full_case = backend->make_case(p, false, seed);
            full_key = fk;
          }
          auto mac_case = backend->make_case(p, true, seed);
          r = measure_pair(*backend, *mac_case, *full_case, spec.measure, stop);
          MACTUNE_CHECK(r.mac.instance == backend->instance_names(p).first &&
                            r.full.instance == backend->instance_names(p).second,
                        "instance names ", r.mac.instance, " / ", r.full.instance,
                        " differ from the predicted ones");
        } catch (const Interrupted&) {
          throw;
        } catch (const Error& e) {
          why = e.what();
          full_case.reset();
          full_key.clear();
        }
      }
      mm.finished_at = mf.finished_at = db::now_utc();
      std::string line;
      if (!why.empty()) {
        mm.status = mf.status = db::PointStatus::failed;
        mm.error = mf.error = why;
        ++res.failed;
        line = label + ": failed: " + why;
      } else {
        std::ostringstream notes;
        notes << "timer=" << backend->timer_name() << "; clock: " << r.clock.note
              << "; wall_s=" << format_number(std::round(r.wall_seconds * 1000) / 1000);
        for (auto [m, side] : {std::pair{&mm, &r.mac}, std::pair{&mf, &r.full}}) {
          m->stats = time_stats(*side);
          m->modeled_bytes = static_cast<double>(side->stats.modeled_bytes());
          m->clock_mhz = r.clock.mhz;
          m->throttled_samples = r.clock.throttled_samples;
          std::ostringstream n;
          n << notes.str()
            << "; skip_ratio=" << format_number(std::round(side->stats.skip_ratio() * 1e4) / 1e4);
          m->notes = n.str();
        }
        const double speedup = r.mac.time.median > 0 ? r.full.time.median / r.mac.time.median : 0;
        std::ostringstream o;
        o << label << ": mac " << ms(r.mac.time.median) << " (n=" << r.mac.time.samples << ", "
          << std::fixed << std::setprecision(1) << r.mac.time.noise * 100 << "%), full "
          << ms(r.full.time.median) << " (n=" << r.full.time.samples << ", "
          << r.full.time.noise * 100 << "%), " << std::setprecision(2) << speedup << "x";
        line = o.str();
      }
      // The baseline first, then the MAC row: the MAC row marks the point complete.
      store.record_measurement(mf);
      store.record_measurement(mm);
      if (why.empty()) ++res.measured;
      progress.end(line, why.empty());
    }
  } catch (const Interrupted&) {
    store.finish_run(run_id, db::RunStatus::interrupted);
    progress.finish();
    throw;
  } catch (...) {
    store.finish_run(run_id, db::RunStatus::failed);
    throw;
  }
  store.finish_run(run_id, db::RunStatus::finished);
  full_case.reset();
  progress.finish();

  // Decisions and the table: over everything stored for this device, build and policy (a
  // shard decides over what its database holds; merge the shards, then `mactune emit`).
  if (opt.emit) {
    const Selection sel{device_id, build_id, policy, cold};
    const Decided d = decide_and_store(store, sel, spec.tie_tolerance);
    res.decisions = d.decisions;
    const std::string refusal =
        write_dispatch(make_table(d, res.db_path), res.dispatch_path, header_path, here);
    if (!refusal.empty())
      throw Error("the emitted table " + res.dispatch_path + " does not load: " + refusal);
    if (opt.report && !res.report_dir.empty()) write_report(store, d, res.report_dir);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace mactune::tuner
