// Replay and calibration (replay/): the same settings as `mactune replay` / `calibrate`,
// returning the same fields as their --json documents (parsed into dicts: the one serializer
// in replay/replay_json.cpp writes both), and decode traces read with the project's own
// validating reader.
#include "kernels/output_paths.h"
#include "python/src/common.h"
#include "replay/calibrate.h"
#include "replay/replay.h"
#include "replay/schedule.h"

namespace mactune::py {
namespace {

using replay::DecodeTrace;
using replay::ReplaySettings;

// A scalar or a sequence of them, as a list (the CLI's comma lists).
// A value listed twice is refused (it would be measured twice).
template <class T>
std::vector<T> as_list(nb::handle h, const char* what) {
  T one;
  if (nb::try_cast(h, one)) return {one};
  std::vector<T> many;
  if (!nb::try_cast(h, many) || many.empty())
    input_error(what, ": expected a number or a non-empty list of numbers, got ",
                nb::cast<std::string>(nb::repr(h)));
  for (std::size_t i = 0; i < many.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (many[i] == many[j])
        input_error(what, ": ", many[i], " is listed twice (each value is measured once)");
  return many;
}

// `layers`: None (every layer) or a non-empty list; [] is a mistake, not "all".
std::optional<std::vector<int>> layer_list(const std::optional<std::vector<int>>& layers) {
  if (layers && layers->empty())
    input_error("layers: an empty list (None replays every layer of the trace)");
  return layers;
}

nb::object parse_json(const std::string& text) {
  return nb::module_::import_("json").attr("loads")(text);
}

// Everything in ReplaySettings but K, r, tau and eps.
ReplaySettings base_settings(const std::string& pick, int min_context,
                             const std::string& summary_dtype, const std::string& rectify,
                             const std::string& kv_dtype, const std::string& engine, int threads,
                             bool baseline) {
  ReplaySettings s;
  s.mac.pick = parse_enum<PickRule>(pick);
  s.mac.min_context = min_context;
  s.mac.summary_dtype = parse_dtype(summary_dtype);
  s.mac.rectify = parse_enum<Rectify>(rectify);
  s.kv_dtype = parse_dtype(kv_dtype);
  s.engine = parse_enum<replay::ReplayEngine>(engine);
  s.threads = threads;
  s.baseline = baseline;
  return s;
}

}  // namespace

void bind_replay(nb::module_& m) {
  m.def(
      "replay",
      [](nb::handle trace_path, std::optional<std::vector<int>> layers, nb::handle K, nb::handle r,
         nb::handle tau, const std::string& pick, int min_context, const std::string& summary_dtype,
         const std::string& rectify, double accept_eps, const std::string& kv_dtype,
         const std::string& engine, int threads, bool baseline, std::optional<double> rope_theta) {
        const DecodeTrace trace = DecodeTrace::open(fspath(trace_path), rope_theta);
        const std::vector<int> ls = layer_list(layers) ? *layers : trace.layers();
        for (int l : ls) trace.require_layer(l);
        const ReplaySettings base = base_settings(pick, min_context, summary_dtype, rectify,
                                                  kv_dtype, engine, threads, baseline);
        std::vector<ReplaySettings> grid;
        for (int k : as_list<int>(K, "K"))
          for (int b : as_list<int>(r, "r"))
            for (double t : as_list<double>(tau, "tau")) {
              ReplaySettings s = base;
              s.mac.ring_capacity = k;
              s.mac.band = b;
              s.mac.tau = t;
              s.mac.accept_eps = accept_eps;
              require_valid(s.mac);
              grid.push_back(s);
            }
        std::vector<replay::ReplayPoint> points;
        {
          nb::gil_scoped_release unlocked;
          points = replay::replay_trace(trace, ls, grid);
        }
        return parse_json(replay::replay_json(trace, points));
      },
      nb::arg("trace"), nb::kw_only(), nb::arg("layers").none() = nb::none(), nb::arg("K") = 512,
      nb::arg("r") = 256, nb::arg("tau") = 0.45, nb::arg("pick") = "nearest",
      nb::arg("min_context") = 0, nb::arg("summary_dtype") = "f32", nb::arg("rectify") = "forward",
      nb::arg("accept_eps") = 1.0, nb::arg("kv_dtype") = "f32", nb::arg("engine") = "cpu",
      nb::arg("threads") = 0, nb::arg("baseline") = false,
      nb::arg("rope_theta").none() = nb::none(),
      "Replays a decode trace through MAC-Attention, as `mactune replay`: every position of "
      "each layer (default: all the trace holds) is one decode step; K, r and tau may be lists "
      "(swept K x r x tau). Returns the --json document as a dict: {'trace', 'path', 'sha256', "
      "'rope_theta', 'layers': [{layer, K, r, tau, ..., hit_rate, skip_ratio, rel_err {mean, "
      "p50, p99, max, frac_gt_0.1, pairs}, rel_err_vs_ref, full_vs_ref_max, seconds}]}.");

  m.def(
      "calibrate",
      [](nb::handle traces, double max_err, const std::string& metric, bool against_ref,
         std::optional<std::vector<int>> layers, nb::handle K, nb::handle r,
         std::optional<std::vector<double>> taus, nb::handle accept_eps, const std::string& pick,
         int min_context, const std::string& summary_dtype, const std::string& rectify,
         const std::string& kv_dtype, const std::string& engine, int threads,
         std::optional<double> rope_theta, nb::handle output) {
        std::vector<std::string> paths;
        if (nb::isinstance<nb::str>(traces) || nb::isinstance<nb::bytes>(traces) ||
            nb::hasattr(traces, "__fspath__"))
          paths.push_back(fspath(traces));
        else
          for (nb::handle t : traces) paths.push_back(fspath(t));
        MACTUNE_REQUIRE(!paths.empty(), "calibrate: no traces given");
        {
          // Before any work: the schedule may not replace a trace (kernels/output_paths.h).
          OutputPaths check;
          for (const std::string& p : paths) check.input(p, "trace", "traces");
          if (!output.is_none()) check.output(fspath(output), "schedule", "output");
          check.check();
        }
        std::vector<DecodeTrace> opened;
        for (const std::string& p : paths) opened.push_back(DecodeTrace::open(p, rope_theta));
        std::vector<const DecodeTrace*> ptrs;
        for (const DecodeTrace& t : opened) ptrs.push_back(&t);

        replay::CalibrationOptions opt;
        opt.base = base_settings(pick, min_context, summary_dtype, rectify, kv_dtype, engine,
                                 threads, false);
        opt.ring_capacities = as_list<int>(K, "K");
        opt.bands = as_list<int>(r, "r");
        opt.accept_eps = as_list<double>(accept_eps, "accept_eps");
        if (taus) opt.taus = *taus;
        opt.metric = metric;
        opt.max_err = max_err;
        opt.against_ref = against_ref;
        opt.validate();
        std::vector<replay::LayerCalibration> result;
        {
          nb::gil_scoped_release unlocked;
          result = replay::calibrate(ptrs, layer_list(layers) ? *layers : std::vector<int>{}, opt);
        }
        const replay::LayerSchedule schedule = replay::calibration_schedule(result, opt, ptrs);
        const std::string comment =
            "per-layer MAC-Attention settings written by "
            "mactune.calibrate\nbudget: err_" +
            metric + " <= " + std::to_string(max_err);
        if (!output.is_none()) replay::save_layer_schedule(fspath(output), schedule, comment);
        nb::object doc = parse_json(replay::calibration_json(result, opt, ptrs));
        doc["schedule"] = replay::layer_schedule_yaml(schedule, comment);
        return doc;
      },
      nb::arg("traces"), nb::kw_only(), nb::arg("max_err"), nb::arg("metric") = "p99",
      nb::arg("against_ref") = false, nb::arg("layers").none() = nb::none(), nb::arg("K") = 512,
      nb::arg("r") = 256, nb::arg("taus").none() = nb::none(), nb::arg("accept_eps") = 1.0,
      nb::arg("pick") = "nearest", nb::arg("min_context") = 0, nb::arg("summary_dtype") = "f32",
      nb::arg("rectify") = "forward", nb::arg("kv_dtype") = "f32", nb::arg("engine") = "cpu",
      nb::arg("threads") = 0, nb::arg("rope_theta").none() = nb::none(),
      nb::arg("output").none() = nb::none(),
      "Per layer, the point of K x r x accept_eps x taus with the largest skip ratio whose error "
      "metric stays within max_err, over one trace or a list (errors pooled), as `mactune "
      "calibrate`. Returns its --json document as a dict ({'traces', 'metric', 'max_err', "
      "'against_ref', 'layers': [{layer, traces, pick, chosen, points}]}) plus 'schedule': the "
      "YAML text, also written to `output` when given (replay::load_layer_schedule reads it).");

  nb::class_<DecodeTrace>(m, "Trace",
                          "A decode trace (safetensors), validated by the project's reader: "
                          "layer{L}.q_pre, k_pre, v [, o_ref] (docs/replay.md).")
      .def(
          "__init__",
          [](DecodeTrace* self, nb::handle path, std::optional<double> rope_theta) {
            new (self) DecodeTrace(DecodeTrace::open(fspath(path), rope_theta));
          },
          nb::arg("path"), nb::arg("rope_theta").none() = nb::none(),
          "Opens and validates the file and every layer's layout (InputError otherwise).")
      .def_prop_ro("name", &DecodeTrace::name)
      .def_prop_ro("path", &DecodeTrace::source)
      .def_prop_ro("sha256", &DecodeTrace::sha256)
      .def_prop_ro("rope_theta", &DecodeTrace::rope_theta)
      .def_prop_ro("layers", &DecodeTrace::layers, "stored layer indices, ascending")
      .def_prop_ro(
          "metadata", [](const DecodeTrace& t) { return t.file().metadata(); },
          "__metadata__ (all strings)")
      .def(
          "load_layer",
          [](const DecodeTrace& t, int layer) {
            replay::TraceLayer l = t.load_layer(layer);
            const auto T = std::size_t(l.steps), H = std::size_t(l.q_heads),
                       Hk = std::size_t(l.kv_heads), D = std::size_t(l.head_dim);
            nb::dict d;
            d["q_pre"] = numpy_copy(l.q_pre.data(), {T, H, D});
            d["k_pre"] = numpy_copy(l.k_pre.data(), {T, Hk, D});
            d["v"] = numpy_copy(l.v.data(), {T, Hk, D});
            if (l.has_o_ref()) d["o_ref"] = numpy_copy(l.o_ref.data(), {T, H, D});
            return d;
          },
          nb::arg("layer"),
          "{'q_pre', 'k_pre', 'v'[, 'o_ref']}: float32 arrays, row t = position t (every value "
          "checked finite).");
}

}  // namespace mactune::py
