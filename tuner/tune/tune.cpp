#include "tuner/tune/tune.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "db/store.h"
#include "kernels/error.h"
#include "kernels/file_io.h"
#include "kernels/output_paths.h"
#include "tuner/decide/emit.h"
#include "tuner/decide/store_io.h"
#include "tuner/measure/measure.h"
#include "tuner/report/report.h"
#include "tuner/search/search.h"
#include "tuner/search/sweep.h"
#include "tuner/spec/expr.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {
namespace {

std::string hostname() {
  char buf[256] = {};
  return gethostname(buf, sizeof(buf) - 1) == 0 ? std::string(buf) : std::string();
}

struct PointIds {
  db::Id workload = 0, mac_instance = 0, full_instance = 0;
  db::PointKey mac, full;
};

InstanceDesc instance_info(const MeasureBackend& b, const std::string& name, bool mac) {
  for (const InstanceDesc& i : b.instances())
    if (i.name == name) return i;
  // Not runnable here: a failed point.
  return InstanceDesc::named(name, b.kind(), mac ? Family::mac : Family::full);
}

}  // namespace

TuneResult run_tune(const TuneOptions& opt, Progress& progress, const std::atomic<bool>* stop) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string text = read_spec_file(opt.spec_path);
  int backend_line = 0;
  const BackendRequest requested =
      opt.backend ? *opt.backend : requested_backend(text, opt.spec_path, &backend_line);
  std::unique_ptr<MeasureBackend> backend;
  try {
    backend = make_backend(requested);
  } catch (const InputError& e) {
    if (opt.backend) input_error("--backend ", request_name(requested), ": ", e.what());
    input_error(opt.spec_path, ':', backend_line, ": device.backend: ", e.what());
  }
  if (opt.wrap_backend) backend = opt.wrap_backend(std::move(backend));
  Spec spec = parse_spec(text, opt.spec_path, backend->kind());
  if (opt.search) spec.search.strategy = *opt.search;
  const DeviceFingerprint here = backend->device();
  if (!glob_match(spec.device.name, here.name))
    input_error(spec.file, ':', spec.device.line, ": device.name: '", spec.device.name,
                "' does not match this machine's ", here.backend, " device '", here.name, "'");
  std::vector<std::string> unreachable;
  std::vector<TunePoint> points = expand_grid(spec, &unreachable);
  for (const std::string& u : unreachable) progress.note("mactune: skipped, unreachable: " + u);
  const std::vector<TunePoint> all_points = points;  // the whole grid: the search needs it
  if (opt.shard) points = shard_points(points, opt.shard->first, opt.shard->second);

  TuneResult res;
  res.points = points.size();
  res.unreachable = unreachable;
  res.search = std::string(name_of(spec.search.strategy));
  res.db_path = opt.db_path.empty() ? spec.output.db : opt.db_path;
  res.dispatch_path = opt.dispatch_path.empty() ? spec.output.dispatch : opt.dispatch_path;
  res.report_dir = opt.report_dir.empty() ? spec.output.report : opt.report_dir;
  const std::string header_path = opt.header_path.empty() ? spec.output.header : opt.header_path;
  // Outputs that cannot be written, or that name the spec or one another, are refused before
  // the sweep spends minutes measuring (kernels/output_paths.h).
  OutputPaths paths;
  paths.input(opt.spec_path, "spec")
      .output(res.db_path, "database", opt.db_path.empty() ? "output.db" : "--db",
              Output::database_mkdir);
  if (opt.emit) {
    paths.output(res.dispatch_path, "dispatch table",
                 opt.dispatch_path.empty() ? "output.dispatch" : "-o", Output::file_mkdir);
    paths.output(header_path, "dispatch header",
                 opt.header_path.empty() ? "output.header" : "--header", Output::file_mkdir);
    if (opt.report) {
      paths.output(res.report_dir, "report directory",
                   opt.report_dir.empty() ? "output.report" : "--report", Output::directory);
      paths.inside(res.report_dir, "report.md", "report file");
    }
  }
  paths.check();
  try {
    backend->use_timer(spec.measure.timer);
  } catch (const InputError& e) {
    input_error(spec.file, ": measure.timer: ", e.what());
  }
  const std::string policy(name_of(backend->timer()));
  const bool cold = spec.measure.mode == CacheMode::cold;

  if (const auto dir = std::filesystem::path(res.db_path).parent_path(); !dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) input_error(res.db_path, ": cannot create its directory: ", ec.message());
  }
  db::Store store = db::Store::open(res.db_path);
  const db::Id device_id = store.upsert_device(here);
  const db::Id build_id = store.upsert_build(current_build(*backend));

  // Keys and stored state of every point first: the progress bar knows what is left.
  auto keys_of = [&](const TunePoint& p) {
    const auto [mac_name, full_name] = backend->instance_names(p);
    PointIds k;
    k.workload = store.upsert_workload(to_db_workload(p));
    k.mac_instance = store.upsert_instance(instance_info(*backend, mac_name, true));
    k.full_instance = store.upsert_instance(instance_info(*backend, full_name, false));
    k.mac = {device_id, build_id, k.mac_instance, p.launch_text(), k.workload, policy, cold};
    k.full = k.mac;
    k.full.instance_id = k.full_instance;
    return k;
  };
  auto needs_measuring = [&](const PointIds& k) {
    const auto sm = store.point_status(k.mac), sf = store.point_status(k.full);
    const bool failed = sm == db::PointStatus::failed || sf == db::PointStatus::failed;
    // A row a halving search left partial is measured again by an exhaustive sweep (whose
    // complete row replaces it); a halving sweep counts it as stored.
    const bool partial = spec.search.strategy == SearchStrategy::exhaustive &&
                         (store.point_partial(k.mac) || store.point_partial(k.full));
    return !sm || !sf || (failed && opt.retry_failed) || partial;
  };
  std::vector<PointIds> ids(points.size());
  std::vector<bool> todo(points.size(), true);
  for (std::size_t i = 0; i < points.size(); ++i) {
    ids[i] = keys_of(points[i]);
    todo[i] = needs_measuring(ids[i]);
    if (!todo[i]) ++res.stored;
  }

  db::RunInfo run;
  run.spec_text = spec.text;
  run.shard_index = opt.shard ? opt.shard->first : 0;
  run.shard_count = opt.shard ? opt.shard->second : 1;
  run.device_id = device_id;
  run.build_id = build_id;
  run.host = hostname();
  run.command = opt.command;
  const db::Id run_id = store.begin_run(run);

  std::vector<PendingPoint> pending;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (todo[i]) pending.push_back({&points[i], ids[i].mac, ids[i].full});
  progress.start(points.size(), res.stored);
  try {
    const SweepCounts c = sweep(*backend, store, spec, run_id, pending, progress, stop);
    res.measured = c.measured;
    res.failed = c.failed;
    res.measuring_seconds = c.measuring_seconds;
    progress.finish();
    // The break-even search: rounds of one probe per open bucket, each decided from what is
    // stored (grid and earlier probes), so a resumed or merged run continues where it was.
    // A shard searches the buckets whose whole grid its database holds (after `db merge` of
    // the grid shards, each shard run on a copy of the merged database) and of those the ones
    // it owns: a bucket's probes carry the grid index of its chosen MAC config's point, so one
    // shard does the whole search of a bucket and the shards' probes are disjoint. A shard
    // database holding only its own grid points searches nothing.
    std::set<std::string> searchable;  // bucket keys (a sharded run: the complete buckets)
    if (spec.decide.search_break_even() && opt.shard) {
      std::map<std::string, bool> complete;
      for (const TunePoint& p : all_points) {
        auto [it, fresh] = complete.try_emplace(bucket_of(to_db_workload(p)).key(), true);
        if (it->second && needs_measuring(keys_of(p))) it->second = false;
      }
      for (const auto& [key, whole] : complete)
        if (whole) searchable.insert(key);
    }
    if (spec.decide.search_break_even() && (!opt.shard || !searchable.empty())) {
      const Selection sel{device_id, build_id, policy, cold};
      DecideOptions dopt;
      dopt.tie_tolerance = spec.decide.tie_tolerance;
      dopt.ties = spec.decide.ties;
      for (int round = 0; round < 16; ++round) {
        std::vector<BucketDecision> decisions = decide_only(store, sel, dopt).decisions;
        std::vector<TunePoint> probes;
        if (opt.shard) {
          std::erase_if(decisions,
                        [&](const BucketDecision& d) { return !searchable.count(d.bucket.key()); });
          probes = shard_points(next_probes(decisions, all_points, spec.decide.resolution),
                                opt.shard->first, opt.shard->second);
        } else {
          probes = next_probes(decisions, points, spec.decide.resolution);
        }
        std::vector<PointIds> probe_ids;
        std::vector<PendingPoint> todo_probes;
        for (const TunePoint& p : probes) probe_ids.push_back(keys_of(p));
        for (std::size_t i = 0; i < probes.size(); ++i)
          if (needs_measuring(probe_ids[i]))
            todo_probes.push_back({&probes[i], probe_ids[i].mac, probe_ids[i].full});
        if (todo_probes.empty()) break;  // none open, or only failed probes left
        progress.note("break-even search, round " + std::to_string(round + 1) + ": " +
                      std::to_string(todo_probes.size()) + " probes");
        progress.start(todo_probes.size(), 0);
        const SweepCounts pc = sweep(*backend, store, spec, run_id, todo_probes, progress, stop);
        progress.finish();
        res.probes += pc.measured;
        res.failed += pc.failed;
        res.measuring_seconds += pc.measuring_seconds;
      }
    }
  } catch (const Interrupted&) {
    store.finish_run(run_id, db::RunStatus::interrupted);
    progress.finish();
    throw;
  } catch (...) {
    // On a full disk or a lock held past the timeout this write may fail too: the run then
    // stays "running" until the next run of this host marks it interrupted, and the error
    // that stopped the sweep is the one reported.
    try {
      store.finish_run(run_id, db::RunStatus::failed);
    } catch (const Error&) {
    }
    throw;
  }
  store.finish_run(run_id, db::RunStatus::finished);

  // Decisions and the table: over everything stored for this device, build and policy (a
  // shard decides over what its database holds; merge the shards, then `mactune emit`).
  if (opt.emit) {
    const Selection sel{device_id, build_id, policy, cold};
    DecideOptions dopt;
    dopt.tie_tolerance = spec.decide.tie_tolerance;
    dopt.ties = spec.decide.ties;
    Decided d = decide_and_store(store, sel, dopt);
    d.unreachable = res.unreachable;
    res.decisions = d.decisions;
    // The cost model places the table's context boundaries (tuner/decide/emit.h).
    const std::vector<ModelRow> model_rows = load_model_rows(store, sel);
    const std::optional<DeviceModels> models = try_fit_device_models(model_rows, d.device);
    const std::string refusal =
        write_dispatch(make_table(d, res.db_path, {models ? &*models : nullptr, &model_rows}),
                       res.dispatch_path, header_path, here);
    if (!refusal.empty())
      throw Error("the emitted table " + res.dispatch_path + " does not load: " + refusal);
    if (opt.report && !res.report_dir.empty()) write_report(store, d, res.report_dir);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace mactune::tuner
