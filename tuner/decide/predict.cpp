#include "tuner/decide/predict.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "kernels/error.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {
namespace {

// The most frequent MAC workload (ties: the first stored), the template of a prediction.
const ModelRow& template_row(const std::vector<ModelRow>& rows) {
  std::map<std::string, int> count;
  const ModelRow* best = nullptr;
  int best_n = 0;
  for (const ModelRow& r : rows) {
    if (r.family != Family::mac) continue;
    db::Workload w = r.workload;
    w.context = 0;
    w.problem.batch = 1;
    w.forced.hit_rate = 0;
    const int n = ++count[w.key() + "|" + r.params];
    if (n > best_n) best_n = n, best = &r;
  }
  if (!best) input_error("the database holds no MAC measurements to predict from");
  return *best;
}

// The measured row of the same workload, side and params, if any.
const ModelRow* find_measured(const std::vector<ModelRow>& rows, const db::Workload& w,
                              Family family, const std::string& params) {
  const std::string key = w.key();
  for (const ModelRow& r : rows)
    if (r.family == family && r.params == params && r.workload.key() == key) return &r;
  return nullptr;
}

std::string ms(double s) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(3) << s * 1e3;
  return o.str();
}

std::string signed_percent(double x) {
  std::ostringstream o;
  o << std::showpos << std::fixed << std::setprecision(1) << x * 100 << '%';
  return o.str();
}

std::string err_text(const ErrorSummary& e) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << "median " << e.median * 100 << "%, p90 " << e.p90 * 100
    << "%, max " << e.max * 100 << "% (" << e.n << " points)";
  return o.str();
}

}  // namespace

Prediction predict(const std::vector<ModelRow>& rows, const DeviceFingerprint& device,
                   const PredictRequest& req) {
  MACTUNE_REQUIRE(!req.contexts.empty() && !req.batches.empty(),
                  "predict needs at least one --context and one --batch");
  const std::set<int> fit_at(req.fit_contexts.begin(), req.fit_contexts.end());
  auto in_fit = [&](const ModelRow& r) {
    return fit_at.empty() || fit_at.count(static_cast<int>(r.workload.context)) > 0;
  };
  Prediction out;
  out.models = fit_device_models(rows, device, in_fit);

  // The step to predict: the template workload with the flags applied.
  const ModelRow& t = template_row(rows);
  db::Workload w = t.workload;
  if (req.q_heads) w.problem.q_heads = *req.q_heads;
  if (req.kv_heads) w.problem.kv_heads = *req.kv_heads;
  if (req.head_dim) w.problem.head_dim = *req.head_dim;
  if (req.page_size) w.problem.page_size = *req.page_size;
  if (req.dtype) w.problem.kv_dtype = parse_dtype(*req.dtype);
  if (req.K) w.mac.ring_capacity = *req.K;
  if (req.r) w.mac.band = *req.r;
  if (req.lag) w.forced.lag = FieldCodec<LagDistribution>::parse(*req.lag);
  if (req.coherence) w.forced.coherence = parse_enum<Coherence>(*req.coherence);
  const std::string params = req.params.value_or(t.params);
  const PlanLimits limits = plan_limits_of(device, params);
  const std::vector<double> hits =
      req.hit_rates.empty() ? std::vector<double>{0, 0.5, 0.9, 1} : req.hit_rates;

  std::vector<double> mac_err, full_err;
  for (int ctx : req.contexts)
    for (int b : req.batches) {
      MACTUNE_REQUIRE(ctx > w.mac.band, "--context ", ctx, " must exceed r = ", w.mac.band);
      w.context = ctx;
      w.problem.batch = b;
      require_valid(w.problem);
      require_valid(w.mac);
      for (double h : hits) {
        MACTUNE_REQUIRE(h >= 0 && h <= 1, "--hit-rate ", h, " is outside [0, 1]");
        w.forced.hit_rate = h;
        PredictedPoint p;
        p.params = params;
        p.step = step_of(w, true, limits);
        p.mac_s = out.models.mac.predict(step_features(p.step));
        StepSpec full = p.step;
        full.mac_enabled = false;
        p.full_s = out.models.full.predict(step_features(full));
        const ModelRow* mm = find_measured(rows, w, Family::mac, params);
        const ModelRow* mf = find_measured(rows, w, Family::full, params);
        if (mm) p.measured_mac_s = mm->fit.seconds;
        if (mf) p.measured_full_s = mf->fit.seconds;
        p.measured_in_fit = (mm && in_fit(*mm)) || (mf && in_fit(*mf));
        if (!p.measured_in_fit) {
          if (mm) mac_err.push_back(std::abs(p.mac_s / mm->fit.seconds - 1));
          if (mf) full_err.push_back(std::abs(p.full_s / mf->fit.seconds - 1));
        }
        out.points.push_back(p);
      }
      w.forced.hit_rate = 0;
      out.break_evens.push_back(
          {ctx, b,
           predicted_break_even(out.models.mac, out.models.full, step_of(w, true, limits))});
    }
  out.mac_unseen = summarize_errors(mac_err);
  out.full_unseen = summarize_errors(full_err);
  return out;
}

std::string prediction_markdown(const Prediction& p) {
  std::ostringstream o;
  const DeviceModels& m = p.models;
  o << "# Predicted decode steps on " << m.device.name << " (" << m.device.digest() << ")\n\n"
    << "Models fitted to " << m.mac_rows << " MAC and " << m.full_rows
    << " full-attention measurements; held out (5-fold): MAC " << err_text(m.mac_held_out)
    << "; full " << err_text(m.full_held_out) << ".\n\n";
  if (!p.points.empty()) {
    const StepSpec& s = p.points.front().step;
    o << "Shape: q_heads " << s.shape.q_heads << ", kv_heads " << s.shape.kv_heads << ", head_dim "
      << s.shape.head_dim << ", " << dtype_name(s.shape.kv_dtype) << ", page " << s.shape.page_size
      << "; K " << s.mac.ring_capacity << ", r " << s.mac.band << ", lag "
      << FieldCodec<LagDistribution>::text(s.forced.lag) << ", " << name_of(s.forced.coherence)
      << "; params " << p.points.front().params << ".\n\n";
  }
  o << "| context | batch | hit rate | skip ratio | MAC (ms) | full (ms) | speedup | measured MAC "
       "| measured full | measured speedup | MAC err | full err |\n"
    << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const PredictedPoint& pt : p.points) {
    const double skip = step_features(pt.step).stats.skip_ratio();
    o << "| " << pt.step.context << " | " << pt.step.shape.batch << " | "
      << format_number(pt.step.forced.hit_rate) << " | " << std::fixed << std::setprecision(3)
      << skip << " | " << ms(pt.mac_s) << " | " << ms(pt.full_s) << " | " << std::setprecision(2)
      << pt.full_s / pt.mac_s << "x | ";
    auto cell = [&](const std::optional<double>& v) { return v ? ms(*v) : std::string("-"); };
    o << cell(pt.measured_mac_s) << " | " << cell(pt.measured_full_s) << " | ";
    if (pt.measured_mac_s && pt.measured_full_s)
      o << std::setprecision(2) << *pt.measured_full_s / *pt.measured_mac_s << "x";
    else
      o << "-";
    const char* tag = pt.measured_in_fit ? " (fitted)" : "";
    o << " | "
      << (pt.measured_mac_s ? signed_percent(pt.mac_s / *pt.measured_mac_s - 1) + tag : "-")
      << " | "
      << (pt.measured_full_s ? signed_percent(pt.full_s / *pt.measured_full_s - 1) + tag : "-")
      << " |\n";
  }
  if (p.mac_unseen.n || p.full_unseen.n)
    o << "\nError on measured points the models did not see: MAC " << err_text(p.mac_unseen)
      << "; full " << err_text(p.full_unseen) << ".\n";
  o << "\n| context | batch | predicted break-even hit rate |\n|---|---|---|\n";
  for (const PredictedBreakEven& be : p.break_evens) {
    o << "| " << be.context << " | " << be.batch << " | ";
    if (be.hit_rate)
      o << std::fixed << std::setprecision(3) << *be.hit_rate;
    else
      o << "never";
    o << " |\n";
  }
  return o.str();
}

}  // namespace mactune::tuner
