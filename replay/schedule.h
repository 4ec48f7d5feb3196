// Per-layer MAC-Attention settings: the YAML file `mactune calibrate` writes and a decoder reads
// to run each layer with its own tau, K and r (the reference uses one global setting).
//
//   format: mactune-layer-schedule
//   version: 1
//   calibration: {metric: p99, max_err: 0.01, engine: cpu, kv_dtype: f32,
//                 traces: [{name: code_1k.safetensors, sha256: ...}]}     # provenance, optional
//   default: {K: 512, r: 256, tau: 1.0}      # optional: layers not listed (tau >= 1: MAC off)
//   layers:
//     - layer: 2
//       K: 512                   # every key optional: MacParams defaults otherwise
//       r: 256
//       tau: 0.9
//       summary_dtype: f32
//       pick: nearest
//       rectify: forward
//       accept_eps: 1.0
//       min_context: 0
//       subtract_guard: 0.0001
//       measured: {hit_rate: 0.41, skip_ratio: 0.17, rel_err_p99: 0.008, ...}   # informational
//
// The settings' keys, types, ranges and choices are the rows of MacParams' field table
// (kernels/fields.h), read and written in table order: a new row is a new key here.
// A layer whose tau is >= 1 never hits: the decoder may run it as plain full attention.
// Unknown keys, wrong types, duplicate layers and invalid settings are errors naming the line.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/problem.h"

namespace mactune::replay {

struct ScheduleTrace {
  std::string name, sha256;
};

// Where a schedule came from (written by calibrate; free-form for hand-written files).
struct ScheduleProvenance {
  std::string metric;  // "p99", "mean", ...
  double max_err = 0;
  std::string engine, kv_dtype;
  std::vector<ScheduleTrace> traces;
};

struct LayerSchedule {
  std::map<int, MacParams> layers;
  std::optional<MacParams> fallback;  // the `default:` entry
  // Per layer: figures measured at calibration, written as comments-in-data for readers.
  std::map<int, std::map<std::string, double>> measured;
  std::optional<ScheduleProvenance> provenance;

  // Settings of `layer`: its entry, else the default, else InputError naming the layer.
  const MacParams& for_layer(int layer) const;
  // Whether `layer` ever reuses (tau < 1).
  bool mac_enabled(int layer) const { return for_layer(layer).tau < 1.0; }
};

// Reads and validates a schedule file. Errors are InputError "<path>:<line>: ...".
LayerSchedule load_layer_schedule(const std::string& path);
// Parses schedule text; `source` names it in errors.
LayerSchedule parse_layer_schedule(const std::string& text, const std::string& source);
// The YAML text of a schedule (every MacParams field written explicitly).
std::string layer_schedule_yaml(const LayerSchedule& s, const std::string& header_comment = "");
// Writes atomically (temporary file, then rename): a crash never leaves half a schedule.
void save_layer_schedule(const std::string& path, const LayerSchedule& s,
                         const std::string& header_comment = "");

}  // namespace mactune::replay
