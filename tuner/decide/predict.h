// `mactune predict`: the cost models of a device (tuner/decide/model_io.h) applied to shapes the
// database may never have measured, with the measured rows beside them where it has them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tuner/decide/model_io.h"

namespace mactune::tuner {

struct PredictRequest {
  std::vector<int> contexts, batches;
  std::vector<double> hit_rates;  // empty: 0, 0.5, 0.9, 1
  // The rest of the step: unset fields come from the database's most frequent MAC workload.
  std::optional<int> q_heads, kv_heads, head_dim, page_size, K, r;
  std::optional<std::string> dtype, lag, coherence, params;
  // Fit only to rows at these contexts (empty: every row); the other measured rows then
  // show how the model does outside what it saw.
  std::vector<int> fit_contexts;
};

struct PredictedPoint {
  StepSpec step;  // the MAC side
  std::string params;
  double mac_s = 0, full_s = 0;
  std::optional<double> measured_mac_s, measured_full_s;  // same workload and params, if stored
  bool measured_in_fit = false;
};

struct PredictedBreakEven {
  int context = 0, batch = 0;
  std::optional<double> hit_rate;  // none: MAC never pays off by the models
};

struct Prediction {
  DeviceModels models;
  std::vector<PredictedPoint> points;
  std::vector<PredictedBreakEven> break_evens;
  // |pred / meas - 1| over the measured points that were not fitted, per family.
  ErrorSummary mac_unseen, full_unseen;
};

// Fits the models (to `req.fit_contexts` when given) and predicts every context x batch x
// hit rate. InputError when a flag makes an invalid shape or the rows cannot be fitted.
Prediction predict(const std::vector<ModelRow>& rows, const DeviceFingerprint& device,
                   const PredictRequest& req);

// Markdown: the models, the table of predictions (measured beside), the break-evens.
std::string prediction_markdown(const Prediction& p);

}  // namespace mactune::tuner
