// Per-layer calibration: see calibrate.h.
#include "replay/calibrate.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "kernels/error.h"

namespace mactune::replay {

std::vector<double> default_calibration_taus() {
  return {0.3, 0.45, 0.6, 0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.96, 0.98};
}

namespace {

// A value listed twice would be measured twice (and tie with itself on the Pareto front).
template <class T>
void require_distinct(const char* what, const std::vector<T>& values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      MACTUNE_REQUIRE(!(values[i] == values[j]), what, " ", values[i],
                      " is listed twice (each value is measured once)");
}

}  // namespace

void CalibrationOptions::validate() const {
  MACTUNE_REQUIRE(
      !ring_capacities.empty() && !bands.empty() && !taus.empty() && !accept_eps.empty(),
      "calibrate needs at least one K, one r, one eps and one tau");
  require_distinct("K", ring_capacities);
  require_distinct("r", bands);
  require_distinct("tau", taus);
  require_distinct("accept_eps", accept_eps);
  MACTUNE_REQUIRE(max_err >= 0.0 && std::isfinite(max_err), "--max-err = ", max_err,
                  " must be a finite number >= 0");
  ErrorStats{}.get(metric);  // throws on an unknown metric
  for (const ReplaySettings& s : grid()) require_valid(s.mac);
}

std::vector<ReplaySettings> CalibrationOptions::grid() const {
  std::vector<ReplaySettings> out;
  for (int K : ring_capacities)
    for (int r : bands)
      for (double eps : accept_eps)
        for (double tau : taus) {
          ReplaySettings s = base;
          s.mac.ring_capacity = K;
          s.mac.band = r;
          s.mac.accept_eps = eps;
          s.mac.tau = tau;
          out.push_back(s);
        }
  return out;
}

MacParams LayerCalibration::chosen(const CalibrationOptions& opt) const {
  if (pick >= 0) return points[static_cast<std::size_t>(pick)].settings.mac;
  MacParams off = opt.base.mac;
  off.ring_capacity = opt.ring_capacities.front();
  off.band = opt.bands.front();
  off.tau = 1.0;  // no reuse: exactly full attention
  return off;
}

void choose(LayerCalibration& lc, const CalibrationOptions& opt) {
  auto& pts = lc.points;
  for (CalibrationPoint& p : pts) {
    p.within_budget = p.err <= opt.max_err;
    p.pareto = true;
  }
  for (CalibrationPoint& a : pts)
    for (const CalibrationPoint& b : pts) {
      const double sa = a.fidelity.skip_ratio, sb = b.fidelity.skip_ratio;
      if (sb >= sa && b.err <= a.err && (sb > sa || b.err < a.err)) a.pareto = false;
    }
  lc.pick = -1;
  for (int i = 0; i < static_cast<int>(pts.size()); ++i) {
    const CalibrationPoint& p = pts[std::size_t(i)];
    if (!p.within_budget) continue;
    if (lc.pick < 0) {
      lc.pick = i;
      continue;
    }
    const CalibrationPoint& q = pts[std::size_t(lc.pick)];
    const MacParams &pm = p.settings.mac, &qm = q.settings.mac;
    const auto key = [](const CalibrationPoint& c, const MacParams& m) {
      return std::make_tuple(-c.fidelity.skip_ratio, c.err, -m.tau, m.ring_capacity, -m.band,
                             m.accept_eps);
    };
    if (key(p, pm) < key(q, qm)) lc.pick = i;
  }
}

std::vector<LayerCalibration> calibrate(const std::vector<const DecodeTrace*>& traces,
                                        const std::vector<int>& layers,
                                        const CalibrationOptions& opt,
                                        const CalibrationCallbacks& cb) {
  MACTUNE_REQUIRE(!traces.empty(), "calibrate needs at least one trace");
  opt.validate();
  require_distinct_layers(layers);
  std::set<int> wanted(layers.begin(), layers.end());
  if (wanted.empty())
    for (const DecodeTrace* t : traces) wanted.insert(t->layers().begin(), t->layers().end());
  for (int layer : wanted) {
    bool found = false;
    for (const DecodeTrace* t : traces) found = found || t->has_layer(layer);
    MACTUNE_REQUIRE(found, "no trace holds layer ", layer);
    // Errors pool over the traces: the layer needs one eligible step in one of them (a
    // schedule from no data would otherwise be written).
    int longest = 0;
    std::string source;
    for (const DecodeTrace* t : traces)
      if (t->has_layer(layer) && t->steps(layer) > longest) {
        longest = t->steps(layer);
        source = t->source();
      }
    require_eligible_steps(longest, layer, opt.base.mac.min_context, source);
  }
  const std::vector<ReplaySettings> grid = opt.grid();
  std::vector<LayerCalibration> result;
  for (int layer : wanted) {
    struct Loaded {
      const DecodeTrace* trace;
      TraceLayer data;
      ExactAttention exact;
    };
    std::vector<Loaded> loaded;
    LayerCalibration lc;
    lc.layer = layer;
    for (const DecodeTrace* t : traces) {
      if (!t->has_layer(layer)) continue;
      for (const ReplaySettings& st : grid) require_replayable(*t, layer, st);
      TraceLayer data = t->load_layer(layer);
      ExactAttention ex =
          exact_attention(data, t->rope_theta(), opt.base.kv_dtype, opt.base.threads);
      loaded.push_back({t, std::move(data), std::move(ex)});
      lc.traces.push_back(t->name());
    }
    for (const ReplaySettings& st : grid) {
      LayerRun pooled;
      bool first = true;
      for (const Loaded& l : loaded) {
        const auto t0 = std::chrono::steady_clock::now();
        LayerRun run = replay_layer(l.data, l.trace->rope_theta(), l.exact, st);
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (cb.on_trace_point) cb.on_trace_point(*l.trace, ReplayPoint{st, summarize(run), secs});
        if (first)
          pooled = std::move(run);
        else
          pooled.pool(run);
        first = false;
      }
      CalibrationPoint pt;
      pt.settings = st;
      pt.fidelity = summarize(pooled);
      if (opt.against_ref && !pt.fidelity.rel_err_vs_ref)
        input_error("layer ", layer, ": --against-ref needs o_ref in every trace");
      pt.err =
          (opt.against_ref ? *pt.fidelity.rel_err_vs_ref : pt.fidelity.rel_err).get(opt.metric);
      pt.within_budget = pt.err <= opt.max_err;
      if (cb.on_point) cb.on_point(layer, pt);
      lc.points.push_back(std::move(pt));
    }
    choose(lc, opt);
    if (cb.on_layer) cb.on_layer(lc);
    result.push_back(std::move(lc));
  }
  return result;
}

LayerSchedule calibration_schedule(const std::vector<LayerCalibration>& result,
                                   const CalibrationOptions& opt,
                                   const std::vector<const DecodeTrace*>& traces) {
  LayerSchedule s;
  ScheduleProvenance p;
  p.metric = std::string(opt.against_ref ? "vs_ref_" : "") + opt.metric;
  p.max_err = opt.max_err;
  p.engine = name_of(opt.base.engine);
  p.kv_dtype = dtype_name(opt.base.kv_dtype);
  for (const DecodeTrace* t : traces) p.traces.push_back({t->name(), t->sha256()});
  s.provenance = p;
  for (const LayerCalibration& lc : result) {
    s.layers[lc.layer] = lc.chosen(opt);
    auto& m = s.measured[lc.layer];
    if (lc.pick < 0) {
      m["skip_ratio"] = 0.0;  // full attention: nothing skipped, nothing lost
      m["hit_rate"] = 0.0;
      m["err"] = 0.0;
      continue;
    }
    const CalibrationPoint& pt = lc.points[std::size_t(lc.pick)];
    m["skip_ratio"] = pt.fidelity.skip_ratio;
    m["hit_rate"] = pt.fidelity.hit_rate;
    m["group_all_hit_rate"] = pt.fidelity.group_all_hit_rate;
    m["err"] = pt.err;
    m["rel_err_mean"] = pt.fidelity.rel_err.mean;
    m["rel_err_p99"] = pt.fidelity.rel_err.p99;
    m["rel_err_max"] = pt.fidelity.rel_err.max;
  }
  return s;
}

}  // namespace mactune::replay
