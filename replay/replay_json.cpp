// JSON of replay and calibration results: the documents `mactune replay --json` and
// `mactune calibrate --json` write (and mactune.replay / mactune.calibrate return in Python).
#include <variant>

#include <nlohmann/json.hpp>

#include "kernels/fields.h"
#include "replay/calibrate.h"
#include "replay/replay.h"

namespace mactune::replay {

using nlohmann::ordered_json;

namespace {

ordered_json error_json(const ErrorStats& e) {
  return {{"mean", e.mean},
          {"p50", e.p50},
          {"p99", e.p99},
          {"max", e.max},
          {"frac_gt_0.1", e.frac_gt_0_1},
          {"pairs", e.count}};
}

// Every MAC setting under its name (MacParams' field table: K, r, tau, ...), typed.
void add_mac(ordered_json& e, const MacParams& mac) {
  for (const Field<MacParams>& row : fields_of<MacParams>())
    std::visit([&](const auto& v) { e[std::string(row.name)] = v; }, row.get(mac));
}

// One point's settings and figures: an entry of `layers` in both documents.
ordered_json point_json(const ReplaySettings& settings, const Fidelity& f, double seconds) {
  const MacParams& mac = settings.mac;
  ordered_json e;
  e["layer"] = f.layer;
  e["engine"] = settings.engine_label();
  e["instance"] = f.instance;
  add_mac(e, mac);
  e["kv_dtype"] = dtype_name(settings.kv_dtype);
  e["steps"] = f.steps;
  e["eligible_steps"] = f.eligible_steps;
  e["hit_rate"] = f.hit_rate;
  e["group_all_hit_rate"] = f.group_all_hit_rate;
  e["group_mixed_rate"] = f.group_mixed_rate;
  e["skip_ratio"] = f.skip_ratio;
  e["head_skip_ratio"] = f.head_skip_ratio;
  e["gate_reject_rate"] = f.gate_reject_rate;
  e["guard_fires"] = f.guard_fires;
  e["rel_err"] = error_json(f.rel_err);
  e["rel_err_vs_ref"] = f.rel_err_vs_ref ? error_json(*f.rel_err_vs_ref) : ordered_json(nullptr);
  e["full_vs_ref_max"] =
      f.full_vs_ref_max < 0 ? ordered_json(nullptr) : ordered_json(f.full_vs_ref_max);
  if (seconds >= 0) e["seconds"] = seconds;
  return e;
}

}  // namespace

std::string replay_json(const DecodeTrace& trace, const std::vector<ReplayPoint>& points) {
  ordered_json doc;
  doc["trace"] = trace.name();
  doc["path"] = trace.source();
  doc["sha256"] = trace.sha256();
  doc["rope_theta"] = trace.rope_theta();
  ordered_json layers = ordered_json::array();
  for (const ReplayPoint& pt : points)
    layers.push_back(point_json(pt.settings, pt.fidelity, pt.seconds));
  doc["layers"] = std::move(layers);
  return doc.dump(2) + "\n";
}

std::string calibration_json(const std::vector<LayerCalibration>& result,
                             const CalibrationOptions& opt,
                             const std::vector<const DecodeTrace*>& traces) {
  ordered_json doc;
  ordered_json ts = ordered_json::array();
  for (const DecodeTrace* t : traces)
    ts.push_back({{"trace", t->name()}, {"path", t->source()}, {"sha256", t->sha256()}});
  doc["traces"] = std::move(ts);
  doc["metric"] = opt.metric;
  doc["max_err"] = opt.max_err;
  doc["against_ref"] = opt.against_ref;
  ordered_json layers = ordered_json::array();
  for (const LayerCalibration& lc : result) {
    ordered_json l;
    l["layer"] = lc.layer;
    l["traces"] = lc.traces;
    l["pick"] = lc.pick >= 0 ? ordered_json(lc.pick) : ordered_json(nullptr);
    const MacParams chosen = lc.chosen(opt);
    ordered_json c = ordered_json::object();
    add_mac(c, chosen);
    l["chosen"] = c;
    ordered_json points = ordered_json::array();
    for (const CalibrationPoint& p : lc.points) {
      ordered_json e = point_json(p.settings, p.fidelity, -1);
      e["err"] = p.err;
      e["within_budget"] = p.within_budget;
      e["pareto"] = p.pareto;
      points.push_back(std::move(e));
    }
    l["points"] = std::move(points);
    layers.push_back(std::move(l));
  }
  doc["layers"] = std::move(layers);
  return doc.dump(2) + "\n";
}

}  // namespace mactune::replay
