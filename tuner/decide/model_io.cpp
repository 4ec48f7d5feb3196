#include "tuner/decide/model_io.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "kernels/cpu/engine_config.h"
#include "kernels/cuda/engine_config.h"
#include "kernels/error.h"
#include "tuner/spec/expr.h"
#include "tuner/spec/skip_ratio.h"

namespace mactune::tuner {
namespace {

std::string ms_text(double s) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(s < 1e-3 ? 4 : 3) << s * 1e3;
  return o.str();
}

std::string percent(double x) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << x * 100 << '%';
  return o.str();
}

}  // namespace

PlanLimits plan_limits_of(const DeviceFingerprint& device, const Launch& launch) {
  // What the launch leaves out keeps the engine's own default (its member initializer,
  // written nowhere else).
  if (device.backend == Backend::cuda) {
    const auto e = engine_of<cuda::EngineConfig>(launch);
    return cuda_plan_limits(device.compute_units, e.min_chunk);
  }
  const auto e = engine_of<cpu::EngineConfig>(launch);
  const int all = device.threads > 0 ? device.threads : device.compute_units;
  return cpu_plan_limits(e.threads > 0 ? e.threads : std::max(all, 1), e.chunk_tokens);
}

PlanLimits plan_limits_of(const DeviceFingerprint& device, const std::string& params) {
  return plan_limits_of(device, parse_launch_params(device.backend, params));
}

StepSpec step_of(const db::Workload& w, bool mac, const PlanLimits& limits) {
  StepSpec s;
  s.shape = w.problem;
  s.context = static_cast<int>(w.context);
  s.mac = w.mac;
  s.mac_enabled = mac;
  s.forced = w.forced;
  s.forced.enabled = mac;
  s.limits = limits;
  return s;
}

std::vector<ModelRow> load_model_rows(const db::Store& store, const Selection& sel) {
  DeviceFingerprint device;
  for (const auto& d : store.devices())
    if (d.id == sel.device_id) device = d.fingerprint;
  db::MeasurementFilter f;
  f.device_id = sel.device_id;
  f.build_id = sel.build_id;
  f.policy = sel.policy;
  f.cold = sel.cold;
  std::vector<ModelRow> out;
  for (const db::MeasurementRow& r : store.measurements(f)) {
    const Family fam = r.instance.family;
    if ((fam != Family::mac && fam != Family::full) || !(r.m.stats.median_s > 0)) continue;
    ModelRow row;
    row.family = fam;
    row.instance = r.instance.name;
    row.params = r.m.point.params;
    if (r.launch.empty())
      input_error(store.path(), ": measurement ", r.id, ": its launch params '", row.params,
                  "' are not stored typed (a text this build's engine tables do not read)");
    row.launch = r.launch;
    row.workload = r.workload;
    row.step = step_of(r.workload, fam == Family::mac, plan_limits_of(device, row.launch));
    row.fit.features = step_features(row.step);
    row.fit.seconds = r.m.stats.median_s;
    row.fit.rel_noise = (r.m.stats.q3_s - r.m.stats.q1_s) / r.m.stats.median_s;
    row.q1 = r.m.stats.q1_s;
    row.q3 = r.m.stats.q3_s;
    out.push_back(std::move(row));
  }
  return out;
}

DeviceModels fit_device_models(const std::vector<ModelRow>& rows, const DeviceFingerprint& device,
                               const std::function<bool(const ModelRow&)>& use) {
  DeviceModels m;
  m.device = device;
  std::vector<FitRow> fit;
  std::vector<bool> is_mac;
  for (const ModelRow& r : rows)
    if (!use || use(r)) {
      fit.push_back(r.fit);
      is_mac.push_back(r.family == Family::mac);
      (r.family == Family::mac ? m.mac_rows : m.full_rows) += 1;
    }
  if (m.mac_rows == 0 || m.full_rows == 0)
    input_error("the cost model needs MAC and full-attention measurements to fit (have ",
                m.mac_rows, " MAC and ", m.full_rows, " full rows)");
  // One fit over both families (tuner/decide/cost_model.h: the family is a fixed cost of its own).
  m.mac = m.full = fit_cost_model(fit);
  const std::vector<double> held_out = cross_validated_errors(fit);
  std::vector<double> mac_err, full_err;
  for (std::size_t i = 0; i < held_out.size(); ++i)
    (is_mac[i] ? mac_err : full_err).push_back(held_out[i]);
  m.mac_held_out = summarize_errors(mac_err);
  m.full_held_out = summarize_errors(full_err);
  return m;
}

std::optional<DeviceModels> try_fit_device_models(const std::vector<ModelRow>& rows,
                                                  const DeviceFingerprint& device) {
  try {
    return fit_device_models(rows, device);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

const ModelRow* chosen_mac_row(const BucketDecision& d, const std::vector<ModelRow>& rows) {
  const ModelRow* best = nullptr;
  for (const ModelRow& r : rows) {
    if (r.family != Family::mac || r.launch != d.mac.config.launch ||
        r.instance != d.mac.config.instance)
      continue;
    const Bucket b = bucket_of(r.workload);
    if (b.shape != d.bucket.shape || b.batch != d.bucket.batch) continue;
    if (d.mac.config.mac && r.workload.mac != *d.mac.config.mac) continue;
    if (!best || r.workload.context < best->workload.context) best = &r;
  }
  return best;
}

std::vector<Disagreement> disagreements(const DeviceModels& m, const std::vector<ModelRow>& rows) {
  std::vector<Disagreement> out;
  for (const ModelRow& r : rows) {
    const bool mac = r.family == Family::mac;
    const CostModel& model = mac ? m.mac : m.full;
    const double typical = (mac ? m.mac_held_out : m.full_held_out).median;
    Disagreement d;
    d.row = &r;
    d.predicted_s = model.predict(r.fit.features);
    d.rel_err = d.predicted_s / r.fit.seconds - 1.0;
    d.allowed = std::max(2 * r.fit.rel_noise, 2 * typical);
    if (std::abs(d.rel_err) > d.allowed) out.push_back(d);
  }
  return out;
}

std::string model_markdown(const DeviceModels& m, const std::vector<ModelRow>& rows) {
  std::ostringstream o;
  const auto& c = m.mac.coef;
  o << "## Cost model\n\n"
    << "Step time = fixed + (MAC step) + KV bytes + ring bytes + groups + work items, each a "
       "non-negative cost, one model for both families fitted to "
    << m.mac_rows << " MAC and " << m.full_rows
    << " full-attention measurements (relative least squares, refitted without the "
    << m.mac.trimmed
    << " outliers of a first fit); held out: 5-fold cross-validation, |predicted / measured - "
       "1|.\n\n"
    << "| fixed (us) | MAC step (us) | KV (ns/KiB) | ring (ns/KiB) | group (us) | item (us) | fit "
       "median err |\n|---|---|---|---|---|---|---|\n"
    << std::setprecision(4) << "| " << c[int(Term::fixed)] * 1e6 << " | "
    << c[int(Term::mac_step)] * 1e6 << " | " << c[int(Term::kv_bytes)] * 1e9 * 1024 << " | "
    << c[int(Term::ring_bytes)] * 1e9 * 1024 << " | " << c[int(Term::groups)] * 1e6 << " | "
    << c[int(Term::items)] * 1e6 << " | " << percent(m.mac.fit_rel_err) << " |\n\n"
    << "| held out | points | median | p90 | max |\n|---|---|---|---|---|\n";
  for (const auto& [name, err] :
       {std::pair{"MAC", &m.mac_held_out}, std::pair{"full", &m.full_held_out}})
    o << "| " << name << " | " << err->n << " | " << percent(err->median) << " | "
      << percent(err->p90) << " | " << percent(err->max) << " |\n";
  const auto off = disagreements(m, rows);
  o << "\n### Where the grid is too coarse\n\n";
  if (off.empty()) {
    o << "Every measured point is within the noise of the model's prediction (2 x its IQR, or 2 x "
         "the held-out median error).\n";
    return o.str();
  }
  o << off.size()
    << " measured points disagree with the model beyond the noise: between these "
       "and their neighbours the step's cost changes in a way the grid does not "
       "resolve (measure in between), or an effect the model lacks.\n\n"
    << "| family | batch | context | hit rate (or skip ratio) | params | measured (ms) | predicted "
       "(ms) | error | "
       "allowed |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const Disagreement& d : off) {
    const ModelRow& r = *d.row;
    o << "| " << name_of(r.family) << " | " << r.workload.problem.batch << " | "
      << r.workload.context << " | " << quota_label(r.workload.forced) << " | " << r.params << " | "
      << ms_text(r.fit.seconds) << " | " << ms_text(d.predicted_s) << " | "
      << (d.rel_err >= 0 ? "+" : "") << percent(d.rel_err) << " | " << percent(d.allowed) << " |\n";
  }
  return o.str();
}

}  // namespace mactune::tuner
