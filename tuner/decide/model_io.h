// The cost model over a database (tuner/decide/cost_model.h): stored measurements to fit rows, the
// models of one device (one per family), where the grid is too coarse for them, and
// predictions for shapes never measured (`mactune predict`).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"
#include "tuner/decide/cost_model.h"
#include "tuner/decide/store_io.h"

namespace mactune::tuner {

// One stored measurement with the step it timed.
struct ModelRow {
  Family family = Family::mac;   // mac or full
  std::string instance, params;  // params: the stored launch text
  Launch launch;                 // the same, typed (as decisions hold it)
  db::Workload workload;
  StepSpec step;
  FitRow fit;
  double q1 = 0, q3 = 0;  // seconds
};

// The planning policy of a stored point: the CPU engine's with the point's threads (0: the
// device's) and chunk_tokens; the CUDA engine's with one resident attend CTA per SM (the
// occupancy is not stored; the items term absorbs the factor).
PlanLimits plan_limits_of(const DeviceFingerprint& device, const Launch& launch);
// The same from a launch text (a user's --params): read through the backend's engine table.
PlanLimits plan_limits_of(const DeviceFingerprint& device, const std::string& params);

// The step of a stored workload, for one side.
StepSpec step_of(const db::Workload& w, bool mac, const PlanLimits& limits);

// Every ok MAC and full measurement of the selection, with its features.
std::vector<ModelRow> load_model_rows(const db::Store& store, const Selection& sel);

// The model of one device, fitted to the rows `use` accepts (all when empty) of both families
// at once (tuner/decide/cost_model.h: the family is a fixed cost of its own, the rest is shared),
// with each family's k-fold held-out error. `mac` and `full` are that one model.
struct DeviceModels {
  DeviceFingerprint device;
  CostModel mac, full;
  ErrorSummary mac_held_out, full_held_out;
  std::size_t mac_rows = 0, full_rows = 0;
};
DeviceModels fit_device_models(const std::vector<ModelRow>& rows, const DeviceFingerprint& device,
                               const std::function<bool(const ModelRow&)>& use = {});

// The same over every row, or none when the rows cannot be fitted (a family missing).
std::optional<DeviceModels> try_fit_device_models(const std::vector<ModelRow>& rows,
                                                  const DeviceFingerprint& device);

// A device's fitted model with the rows it was fitted to, for the report and emit. Empty
// (models null): no model, nothing predicted.
struct FittedModel {
  const DeviceModels* models = nullptr;
  const std::vector<ModelRow>* rows = nullptr;
  bool usable() const { return models && rows; }
};

// The stored MAC row of a bucket's chosen config at its shape and batch (the smallest context
// measured), whose step the model varies to predict the bucket at other contexts; null if none.
const ModelRow* chosen_mac_row(const BucketDecision& d, const std::vector<ModelRow>& rows);

// A measured point whose prediction is off by more than the noise allows: the grid is too
// coarse around it for the model (or the model misses an effect there). Beyond the noise:
// |pred / meas - 1| > max(2 x the point's IQR / median, 2 x the family's held-out median
// error).
struct Disagreement {
  const ModelRow* row = nullptr;
  double predicted_s = 0;
  double rel_err = 0;  // pred / meas - 1
  double allowed = 0;  // the bound it exceeds
};
std::vector<Disagreement> disagreements(const DeviceModels& m, const std::vector<ModelRow>& rows);

// Markdown: the two models (coefficients, rows, held-out error) and the disagreements.
std::string model_markdown(const DeviceModels& m, const std::vector<ModelRow>& rows);

}  // namespace mactune::tuner
