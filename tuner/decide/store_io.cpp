#include "tuner/decide/store_io.h"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>

#include "mactune/build_info.h"
#include "tuner/spec/skip_ratio.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

db::BuildInfo current_build(const MeasureBackend& backend) {
  return current_build(backend.instances());
}

db::BuildInfo current_build(const std::vector<InstanceDesc>& instances) {
  db::BuildInfo b;
  b.git_revision = build::git_revision;
  b.compiler = build::compiler;
  b.version = build::version;
  b.build_type = build::build_type;
  std::vector<std::string> names;
  for (const InstanceDesc& i : instances) names.push_back(i.name);
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
  w.forced = p.forced;
  w.mac = p.mac;
  return w;
}

Bucket bucket_of(const db::Workload& w) {
  return Bucket::of(w.problem, w.context);
}

std::string variant_of(const db::Workload& w) {
  std::string v;  // every forced-hit field but the hit rate (and the skip ratio's, unused)
  const bool by_skip = w.forced.quota == ForcedQuota::skip_ratio;
  for (const Field<ForcedHits>& f : fields_of<ForcedHits>()) {
    if (f.name == "hit_rate") continue;
    if (!by_skip && (f.name == "quota" || f.name == "skip_ratio")) continue;
    if (!v.empty()) v += ',';
    v.append(f.name).append("=").append(f.text_of(w.forced));
  }
  if (!w.extra.empty()) v += "," + w.extra;
  return v;
}

std::string config_text(const Config& c) {
  std::string t = launch_text(c.launch);
  if (c.mac) t += ";" + fields_text(*c.mac);
  return t;
}

namespace {

// The Config of a stored measurement: its instance, its typed launch and (Family::mac) its
// workload's MAC settings. The one place a stored row becomes a Config: the pairs' sides and
// the incumbents are built by it, so an incumbent compares equal to the pair it came from.
// A launch stored only as text (a params text this build's engine tables do not read) has no
// Config: InputError, naming the row.
Config config_of(const db::Store& store, const db::MeasurementRow& r, Family family) {
  if (r.launch.empty())
    input_error(store.path(), ": measurement ", r.id, ": its launch params '", r.m.point.params,
                "' are not stored typed (a text this build's engine tables do not read)");
  Config c{r.instance.name, r.launch, std::nullopt};
  if (family == Family::mac) c.mac = r.workload.mac;
  return c;
}

// 1 - KV tokens read / total of the row's step (db Measurement::kv_tokens_read), if counted.
std::optional<double> measured_skip_ratio(const db::Measurement& m) {
  if (!m.kv_tokens_read || !m.kv_tokens_total || *m.kv_tokens_total <= 0) return std::nullopt;
  return 1.0 - static_cast<double>(*m.kv_tokens_read) / static_cast<double>(*m.kv_tokens_total);
}

std::string curve_text(const BreakEven& be) {
  std::ostringstream o;
  for (const CurvePoint& p : be.curve)
    o << (o.tellp() ? " " : "") << format_number(p.hit_rate) << ':' << std::fixed
      << std::setprecision(2) << p.speedup << "x:" << name_of(p.verdict);
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
    (r.instance.family == Family::full ? slot.second : slot.first) = &r;
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
    p.hit_rate = mac->workload.forced.hit_rate;
    p.variant = variant_of(mac->workload);
    if (mac->workload.forced.quota == ForcedQuota::skip_ratio) {
      p.skip_ratio = mac->workload.forced.skip_ratio;
      p.measured_skip = measured_skip_ratio(mac->m);
    }
    p.mac_config = config_of(store, *mac, Family::mac);
    p.full_config = config_of(store, *full, Family::full);
    // Paired by the same params text, so one typed launch: a pair measures both sides with it.
    MACTUNE_CHECK(p.mac_config.launch == p.full_config.launch, store.path(), ": measurements ",
                  mac->id, " and ", full->id, " pair with different typed launches");
    p.mac_row = mac->id;
    p.full_row = full->id;
    p.mac = mac->m.stats;
    p.full = full->m.stats;
    p.mac_partial = mac->m.partial;
    p.full_partial = full->m.partial;
    out.pairs.push_back(std::move(p));
  }
  return out;
}

std::map<std::string, Config> load_incumbents(const db::Store& store, const Selection& sel) {
  std::map<std::string, Config> inc;
  for (const db::BestConfig& b : store.best_configs(sel.device_id)) {
    // A decision whose config no stored measurement holds (migrated from a file that lost
    // it) has no incumbent to offer.
    if (b.policy != sel.policy || b.hit_rate || b.measurement_id == 0) continue;
    db::MeasurementFilter f;
    f.device_id = sel.device_id;
    f.id = b.measurement_id;
    f.ok_only = false;
    const auto rows = store.measurements(f);
    if (rows.empty() || rows.front().launch.empty()) continue;
    inc[b.bucket.key() + "/" + std::string(name_of(b.family))] =
        config_of(store, rows.front(), b.family);
  }
  return inc;
}

void store_decisions(db::Store& store, const Selection& sel, const LoadedPairs& loaded,
                     const std::vector<BucketDecision>& decisions, double tie_tolerance) {
  // A measured row of each config in each bucket the pairs hold (bucket|Config::id() -> row),
  // the earliest.
  std::map<std::string, db::Id> row_of;
  for (const PairRow& p : loaded.pairs) {
    for (const auto& [c, row] :
         {std::pair(p.mac_config, p.mac_row), std::pair(p.full_config, p.full_row)}) {
      if (row == 0) continue;
      auto [it, fresh] = row_of.try_emplace(p.bucket.key() + "|" + c.id(), row);
      if (!fresh) it->second = std::min(it->second, row);
    }
  }
  const auto row = [&](const Bucket& b, const Config& c) {
    const auto it = row_of.find(b.key() + "|" + c.id());
    return it == row_of.end() ? db::Id{0} : it->second;
  };
  for (const BucketDecision& d : decisions) {
    for (const Family family : {Family::full, Family::mac}) {
      const Choice& c = family == Family::mac ? d.mac : d.full;
      if (c.empty()) continue;
      db::BestConfig b;
      b.device_id = sel.device_id;
      b.build_id = sel.build_id;
      b.bucket = d.bucket;
      b.family = family;
      b.policy = sel.policy;
      b.instance = c.config.instance;
      b.params = config_text(c.config);
      b.measurement_id = row(d.bucket, c.config);
      b.median_s = c.score;  // full: seconds; mac: relative score (1 = best everywhere)
      if (c.margin > 0) b.margin = c.margin;
      b.tie_tolerance = tie_tolerance;
      for (std::size_t i = 0; i < c.ties.size(); ++i)
        b.tie_set.push_back({c.ties[i].instance, config_text(c.ties[i]), c.tie_scores.at(i),
                             row(d.bucket, c.ties[i])});
      store.write_best_config(b);
    }
    db::BreakEvenRow be;
    be.device_id = sel.device_id;
    be.build_id = sel.build_id;
    be.bucket = d.bucket;
    be.policy = sel.policy;
    be.status = d.break_even.status;
    be.hit_rate = d.break_even.hit_rate;
    if (d.break_even.hit_rate)
      for (const CurvePoint& p : d.break_even.curve)
        if (p.hit_rate == *d.break_even.hit_rate) be.speedup = p.speedup;
    be.mac_instance = d.mac.config.instance;
    be.mac_params = config_text(d.mac.config);
    be.full_instance = d.full.config.instance;
    be.full_params = config_text(d.full.config);
    if (!d.mac.empty()) be.mac_measurement_id = row(d.bucket, d.mac.config);
    if (!d.full.empty()) be.full_measurement_id = row(d.bucket, d.full.config);
    std::ostringstream notes;
    notes << "interval=iqr;";
    if (d.break_even.hit_rate && d.break_even.lo)  // (lo, hi] or [lo, hi]: emit uses hi
      notes << " bracket=" << (d.break_even.lo_closed ? '[' : '(')
            << format_number(*d.break_even.lo) << ',' << format_number(*d.break_even.hit_rate)
            << "];";
    for (const auto& [variant, v] : d.by_variant)
      notes << ' ' << variant << " [" << name_of(v.status) << "] " << curve_text(v) << ';';
    be.notes = notes.str();
    store.write_break_even(be);
  }
}

}  // namespace mactune::tuner
