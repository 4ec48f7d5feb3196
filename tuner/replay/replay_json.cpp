// JSON of replay results: the document `mactune replay --json` writes.
#include <nlohmann/json.hpp>

#include "tuner/replay/replay.h"

namespace mactune::tuner {

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

}  // namespace

std::string replay_json(const DecodeTrace& trace, const std::vector<ReplayPoint>& points) {
  ordered_json doc;
  doc["trace"] = trace.name();
  doc["path"] = trace.source();
  doc["sha256"] = trace.sha256();
  doc["rope_theta"] = trace.rope_theta();
  ordered_json layers = ordered_json::array();
  for (const ReplayPoint& pt : points) {
    const MacParams& mac = pt.settings.mac;
    const Fidelity& f = pt.fidelity;
    ordered_json e;
    e["layer"] = f.layer;
    e["engine"] = pt.settings.engine_label();
    e["instance"] = f.instance;
    e["K"] = mac.ring_capacity;
    e["r"] = mac.band;
    e["tau"] = mac.tau;
    e["pick"] = pick_rule_name(mac.pick);
    e["min_context"] = mac.min_context;
    e["summary_dtype"] = dtype_name(mac.summary_dtype);
    e["rectify"] = rectify_name(mac.rectify);
    e["accept_eps"] = mac.accept_eps;
    e["kv_dtype"] = dtype_name(pt.settings.kv_dtype);
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
    e["seconds"] = pt.seconds;
    layers.push_back(std::move(e));
  }
  doc["layers"] = std::move(layers);
  return doc.dump(2) + "\n";
}

}  // namespace mactune::tuner
