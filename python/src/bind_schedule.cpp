// Layer schedules (replay/schedule.h) from Python: read one as the C++ decoder does, and write
// one with the same serializer `mactune calibrate` uses, for settings chosen in Python (the
// model-in-the-loop calibration, mactune.calibrate_inloop).
#include "kernels/output_paths.h"
#include "python/src/common.h"
#include "replay/schedule.h"

namespace mactune::py {
namespace {

nb::dict schedule_dict(const replay::LayerSchedule& s) {
  nb::dict d;
  d["layers"] = nb::cast(s.layers);
  d["default"] = s.fallback ? nb::cast(*s.fallback) : nb::none();
  d["measured"] = nb::cast(s.measured);
  if (s.provenance) {
    nb::dict p;
    p["metric"] = s.provenance->metric;
    p["max_err"] = s.provenance->max_err;
    p["engine"] = s.provenance->engine;
    p["kv_dtype"] = s.provenance->kv_dtype;
    nb::list traces;
    for (const replay::ScheduleTrace& t : s.provenance->traces) {
      nb::dict e;
      e["name"] = t.name;
      e["sha256"] = t.sha256;
      traces.append(e);
    }
    p["traces"] = traces;
    d["calibration"] = p;
  } else {
    d["calibration"] = nb::none();
  }
  return d;
}

}  // namespace

void bind_schedule(nb::module_& m) {
  m.def(
      "load_schedule",
      [](nb::handle path) { return schedule_dict(replay::load_layer_schedule(fspath(path))); },
      nb::arg("path"),
      "Reads a layer schedule as replay::load_layer_schedule does (InputError 'file:line: ...' "
      "on anything invalid): {'layers': {layer: MacParams}, 'default': MacParams or None, "
      "'measured': {layer: {name: value}}, 'calibration': {metric, max_err, engine, kv_dtype, "
      "traces: [{name, sha256}]} or None}.");

  m.def(
      "schedule_yaml",
      [](const std::map<int, MacParams>& layers, std::optional<MacParams> fallback,
         const std::map<int, std::map<std::string, double>>& measured, const std::string& metric,
         double max_err, const std::string& engine, const std::string& kv_dtype,
         const std::vector<std::pair<std::string, std::string>>& traces, const std::string& comment,
         nb::handle output) {
        if (!output.is_none()) OutputPaths().output(fspath(output), "schedule", "output").check();
        replay::LayerSchedule s;
        for (const auto& [layer, mac] : layers) {
          if (layer < 0) input_error("layers: layer ", layer, " is negative");
          require_valid(mac);
          s.layers[layer] = mac;
        }
        if (fallback) {
          require_valid(*fallback);
          s.fallback = *fallback;
        }
        for (const auto& [layer, values] : measured) {
          if (!layers.count(layer))
            input_error("measured: layer ", layer, " has no entry in layers");
          s.measured[layer] = values;
        }
        if (!metric.empty()) {
          replay::ScheduleProvenance p{metric, max_err, engine, kv_dtype, {}};
          for (const auto& [name, sha] : traces) p.traces.push_back({name, sha});
          s.provenance = p;
        }
        if (!output.is_none()) replay::save_layer_schedule(fspath(output), s, comment);
        return replay::layer_schedule_yaml(s, comment);
      },
      nb::arg("layers"), nb::kw_only(), nb::arg("default").none() = nb::none(),
      nb::arg("measured") = std::map<int, std::map<std::string, double>>{}, nb::arg("metric") = "",
      nb::arg("max_err") = 0.0, nb::arg("engine") = "cpu", nb::arg("kv_dtype") = "f32",
      nb::arg("traces") = std::vector<std::pair<std::string, std::string>>{},
      nb::arg("comment") = "", nb::arg("output").none() = nb::none(),
      "The YAML text of a layer schedule ({layer: MacParams}, an optional default, measured "
      "figures per layer; with a metric, the calibration provenance: max_err, engine, kv_dtype "
      "and traces as (name, sha256) pairs), written atomically to `output` when given. "
      "load_schedule() and replay::load_layer_schedule read it back.");
}

}  // namespace mactune::py
