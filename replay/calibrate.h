// Per-layer calibration: sweep tau (and K, r) over one or more traces, measure skip ratio and
// output error of every point, and pick per layer the point with the largest KV skip ratio
// whose error stays within a budget. The whole curve is kept (the Pareto front marked), since
// the shape of the trade-off says more than the pick: a flat front means tau barely matters, a
// cliff means the budget sits on a knife edge.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "replay/replay.h"
#include "replay/schedule.h"

namespace mactune::replay {

// Taus swept when none are given: coarse where hits are plentiful, fine near 1 where small
// budgets land.
std::vector<double> default_calibration_taus();

struct CalibrationOptions {
  ReplaySettings base;  // everything but K, r and tau (pick, min_context, dtypes, engine, ...)
  // The lists to try start as one value each, MacParams' default.
  std::vector<int> ring_capacities{base.mac.ring_capacity};
  std::vector<int> bands{base.mac.band};
  std::vector<double> accept_eps{base.mac.accept_eps};  // acceptance-gate eps (1: gate off)
  std::vector<double> taus = default_calibration_taus();
  std::string metric = "p99";  // ErrorStats::get: mean, p50, p99, max, frac_gt_0.1
  double max_err = 0.01;
  bool against_ref = false;  // budget on rel_err_vs_ref (o_ref) instead of rel_err (o_full)

  void validate() const;  // InputError naming the bad list or value
  // The settings of the grid, in sweep order (K outer, then r, then eps, then tau).
  std::vector<ReplaySettings> grid() const;
};

struct CalibrationPoint {
  ReplaySettings settings;
  Fidelity fidelity;  // pooled over the traces that hold the layer
  double err = 0;     // the budgeted metric
  bool within_budget = false;
  bool pareto = false;  // no other point has >= skip and <= err, one of them strictly
};

struct LayerCalibration {
  int layer = 0;
  std::vector<std::string> traces;  // names of the traces pooled
  std::vector<CalibrationPoint> points;
  int pick = -1;  // index into points; -1: nothing within budget (the layer runs without MAC)
  // The settings the schedule gets: the pick, or tau = 1 (no reuse) when nothing fits.
  MacParams chosen(const CalibrationOptions& opt) const;
};

// Marks the Pareto front and picks: largest skip within budget; ties to the smaller error,
// then the larger tau, the smaller K, the larger r, the smaller eps (the more conservative).
void choose(LayerCalibration& lc, const CalibrationOptions& opt);

// Callbacks as each point finishes: per trace (to store it) and pooled (to print it).
struct CalibrationCallbacks {
  std::function<void(const DecodeTrace&, const ReplayPoint&)> on_trace_point;
  std::function<void(int layer, const CalibrationPoint&)> on_point;
  std::function<void(const LayerCalibration&)> on_layer;  // chosen, front marked
};

// Calibrates `layers` (empty: every layer any trace holds) over `traces`.
std::vector<LayerCalibration> calibrate(const std::vector<const DecodeTrace*>& traces,
                                        const std::vector<int>& layers,
                                        const CalibrationOptions& opt,
                                        const CalibrationCallbacks& cb = {});

// The schedule of a calibration: one entry per layer, measured figures and provenance included.
LayerSchedule calibration_schedule(const std::vector<LayerCalibration>& result,
                                   const CalibrationOptions& opt,
                                   const std::vector<const DecodeTrace*>& traces);

// The JSON of a calibration (`mactune calibrate --json`): {"traces": [{trace, path, sha256}],
// "metric", "max_err", "against_ref", "layers": [{layer, traces, pick (index or null), chosen
// {K, r, tau, ...}, points: [replay_json's entry fields + err, within_budget, pareto]}]}.
std::string calibration_json(const std::vector<LayerCalibration>& result,
                             const CalibrationOptions& opt,
                             const std::vector<const DecodeTrace*>& traces);

}  // namespace mactune::replay
