#include "tuner/store_io.h"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>

#include "mactune/build_info.h"
#include "tuner/axes.h"
#include "tuner/spec.h"

namespace mactune::tuner {

db::BuildInfo current_build(const Backend& backend) {
  return current_build(backend.instances());
}

db::BuildInfo current_build(const std::vector<InstanceInfo>& instances) {
  db::BuildInfo b;
  b.git_revision = build::git_revision;
  b.compiler = build::compiler;
  b.version = build::version;
  b.build_type = build::build_type;
  std::vector<std::string> names;
  for (const InstanceInfo& i : instances) names.push_back(i.name);
  std::sort(names.begin(), names.end());
  std::string all;
  for (const auto& n : names) all += n + "\n";
  b.registry_hash = db::fnv1a_hex(all);
  return b;
}

db::Workload to_db_workload(const TunePoint& p) {
  db::Workload w;
  w.problem = p.shape;
  w.context = p.context;
  w.hit_rate = p.forced.hit_rate;
  w.lag = lag_text(p.forced.lag);
  w.coherence = std::string(coherence_name(p.forced.coherence));
  w.mac = p.mac;
  return w;
}

Bucket bucket_of(const db::Workload& w) {
  return {w.problem.head_dim,         w.problem.q_heads,
          w.problem.kv_heads,         std::string(dtype_name(w.problem.kv_dtype)),
          w.problem.page_size,        w.problem.batch,
          static_cast<int>(w.context)};
}

std::string variant_of(const db::Workload& w) {
  std::string v = "lag=" + w.lag + ",coherence=" + w.coherence;
  if (!w.extra.empty()) v += "," + w.extra;
  return v;
}

namespace {

Summary summary_of(const db::TimeStats& t) {
  Summary s;
  s.samples = t.samples;
  s.median = t.median_s;
  s.q1 = t.q1_s;
  s.q3 = t.q3_s;
  s.min = t.min_s;
  s.max = t.max_s;
  s.mean = t.mean_s;
  s.noise = t.rel_noise;
  return s;
}

db::Bucket db_bucket(const Bucket& b) {
  db::Bucket d;
  d.problem.batch = b.batch;
  d.problem.q_heads = b.q_heads;
  d.problem.kv_heads = b.kv_heads;
  d.problem.head_dim = b.head_dim;
  d.problem.kv_dtype = parse_dtype(b.dtype);
  d.problem.page_size = b.page_size;
  d.context = b.context;
  return d;
}

std::string curve_text(const BreakEven& be) {
  std::ostringstream o;
  for (const CurvePoint& p : be.curve)
    o << (o.tellp() ? " " : "") << format_number(p.hit_rate) << ':' << std::fixed
      << std::setprecision(2) << p.speedup << "x:" << verdict_name(p.verdict);
  return o.str();
}

}  // namespace

Selection select_rows(const db::Store& store, const std::string& device,
                      const DeviceFingerprint& here) {
  const auto devices = store.devices();
  if (devices.empty())
    input_error(store.path(), ": the database holds no devices (run `mactune tune` first)");
  const db::DeviceRow* chosen = nullptr;
  if (device == "auto") {
    for (const auto& d : devices)
      if (d.fingerprint.key() == here.key()) chosen = &d;
    if (!chosen && devices.size() == 1) chosen = &devices[0];
    if (!chosen) {
      std::ostringstream names;
      for (const auto& d : devices)
        names << (names.tellp() ? "; " : "") << d.digest << " " << d.fingerprint.name;
      input_error(store.path(), ": holds ", devices.size(), " devices and none is this machine (",
                  names.str(), "): pick one with --device DIGEST");
    }
  } else {
    for (const auto& d : devices)
      if (d.digest == device || glob_match(device, d.fingerprint.name)) {
        if (chosen)
          input_error("--device '", device, "' matches more than one device in ", store.path());
        chosen = &d;
      }
    if (!chosen) input_error("--device '", device, "' matches no device in ", store.path());
  }
  Selection sel;
  sel.device_id = chosen->id;
  db::MeasurementFilter f;
  f.device_id = chosen->id;
  const auto rows = store.measurements(f);
  if (rows.empty())
    input_error(store.path(), ": no successful measurements on device '", chosen->fingerprint.name,
                "'");
  const db::MeasurementRow* latest = &rows.front();
  for (const auto& r : rows)
    if (r.m.finished_at > latest->m.finished_at) latest = &r;
  sel.build_id = latest->m.point.build_id;
  sel.policy = latest->m.point.policy;
  sel.cold = latest->m.point.cold;
  return sel;
}

LoadedPairs load_pairs(const db::Store& store, const Selection& sel) {
  db::MeasurementFilter f;
  f.device_id = sel.device_id;
  f.build_id = sel.build_id;
  f.policy = sel.policy;
  f.cold = sel.cold;
  f.ok_only = false;
  const auto rows = store.measurements(f);
  // Pair by (workload, params): the MAC side and the full side of one point.
  std::map<std::pair<db::Id, std::string>,
           std::pair<const db::MeasurementRow*, const db::MeasurementRow*>>
      by_point;
  LoadedPairs out;
  for (const auto& r : rows) {
    if (r.m.status != db::PointStatus::ok) {
      ++out.failed;
      continue;
    }
    auto& slot = by_point[{r.m.point.workload_id, r.m.point.params}];
    (r.instance.family == "full" ? slot.second : slot.first) = &r;
  }
  for (const auto& [key, slot] : by_point) {
    const auto [mac, full] = slot;
    if (!mac || !full) {
      ++out.incomplete;
      continue;
    }
    if (mac->m.run_id != full->m.run_id) ++out.split_runs;
    PairRow p;
    p.bucket = bucket_of(mac->workload);
    p.hit_rate = mac->workload.hit_rate;
    p.variant = variant_of(mac->workload);
    p.mac_instance = mac->instance.name;
    p.full_instance = full->instance.name;
    p.params = mac->m.point.params;
    p.mac_settings = mac_text(mac->workload.mac);
    p.K = mac->workload.mac.ring_capacity;
    p.r = mac->workload.mac.band;
    p.mac = summary_of(mac->m.stats);
    p.full = summary_of(full->m.stats);
    out.pairs.push_back(std::move(p));
  }
  return out;
}

std::map<std::string, std::string> load_incumbents(const db::Store& store, const Selection& sel) {
  std::map<std::string, std::string> inc;
  for (const db::BestConfig& b : store.best_configs(sel.device_id)) {
    if (b.policy != sel.policy || b.bucket.hit_rate) continue;
    const Bucket bk{
        b.bucket.problem.head_dim,         b.bucket.problem.q_heads,
        b.bucket.problem.kv_heads,         std::string(dtype_name(b.bucket.problem.kv_dtype)),
        b.bucket.problem.page_size,        b.bucket.problem.batch,
        static_cast<int>(b.bucket.context)};
    Choice c;
    c.instance = b.instance;
    c.params = b.params;
    if (b.family == "mac") {
      const auto semi = b.params.find(';');
      c.params = b.params.substr(0, semi);
      c.mac_settings = semi == std::string::npos ? "" : b.params.substr(semi + 1);
    }
    inc[bk.key() + "/" + b.family] = c.id();
  }
  return inc;
}

void store_decisions(db::Store& store, const Selection& sel,
                     const std::vector<BucketDecision>& decisions, double tie_tolerance) {
  auto split = [](const std::string& id) {
    std::vector<std::string> parts;
    std::istringstream in(id);
    std::string s;
    while (std::getline(in, s, '|')) parts.push_back(s);
    parts.resize(3);
    return parts;
  };
  for (const BucketDecision& d : decisions) {
    for (const char* family : {"full", "mac"}) {
      const Choice& c = std::string(family) == "mac" ? d.mac : d.full;
      if (c.instance.empty()) continue;
      db::BestConfig b;
      b.device_id = sel.device_id;
      b.build_id = sel.build_id;
      b.bucket = db_bucket(d.bucket);
      b.family = family;
      b.policy = sel.policy;
      b.instance = c.instance;
      b.params = c.mac_settings.empty() ? c.params : c.params + ";" + c.mac_settings;
      b.median_s = c.score;  // full: seconds; mac: relative score (1 = best everywhere)
      if (c.margin > 0) b.margin = c.margin;
      b.tie_tolerance = tie_tolerance;
      for (std::size_t i = 0; i < c.ties.size(); ++i) {
        const auto parts = split(c.ties[i]);
        b.tie_set.push_back({parts[0], parts[2].empty() ? parts[1] : parts[1] + ";" + parts[2],
                             c.tie_scores.at(i)});
      }
      store.write_best_config(b);
    }
    db::BreakEven be;
    be.device_id = sel.device_id;
    be.build_id = sel.build_id;
    be.bucket = db_bucket(d.bucket);
    be.policy = sel.policy;
    be.status = d.break_even.status == "ok"          ? db::BreakEvenStatus::found
                : d.break_even.status == "ambiguous" ? db::BreakEvenStatus::ambiguous
                                                     : db::BreakEvenStatus::never;
    be.hit_rate = d.break_even.hit_rate;
    if (d.break_even.hit_rate)
      for (const CurvePoint& p : d.break_even.curve)
        if (p.hit_rate == *d.break_even.hit_rate) be.speedup = p.speedup;
    be.mac_instance = d.mac.instance;
    be.mac_params = d.mac.params + ";" + d.mac.mac_settings;
    be.full_instance = d.full.instance;
    be.full_params = d.full.params;
    std::ostringstream notes;
    notes << "interval=iqr;";
    for (const auto& [variant, v] : d.by_variant)
      notes << ' ' << variant << " [" << v.status << "] " << curve_text(v) << ';';
    be.notes = notes.str();
    store.write_break_even(be);
  }
}

}  // namespace mactune::tuner
