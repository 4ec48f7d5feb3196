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
using MacField = Field<MacParams>;

// ---- The MAC keywords of replay and calibrate: every row of MacParams' field table
// (kernels/problem.h) is a keyword of the same name, read and checked by its row, as the CLI's
// flags are (cli/field_flags.h); a new row is a keyword here with no code. The sweep axes take
// one value or a list of them (their cross product is run), every other row one value.

// A swept row: its keyword (the row's name, or the function's own spelling: calibrate's
// `taus`) and the values run when it is not given (none: the library's own grid).
struct Axis {
  std::string_view row;
  std::string keyword;
  std::vector<Scalar> defaults;
  // A value listed twice is refused here ("K: 64 is listed twice"); false leaves it to the
  // library (calibrate's taus: "tau 0.5 is listed twice").
  bool refuse_repeats = true;
};

// What a call gave: every row not swept in `base`, the values of each axis given.
struct MacKeywordValues {
  MacParams base;
  std::vector<std::pair<const MacField*, std::vector<Scalar>>> axes;  // axes given, in order

  const std::vector<Scalar>* axis(std::string_view row) const {
    for (const auto& [f, values] : axes)
      if (f->name == row) return &values;
    return nullptr;
  }
};

// One value or a non-empty sequence of them, each read and checked by the row.
std::vector<Scalar> axis_values(const char* function, const MacField& f, const Axis& axis,
                                nb::handle h) {
  const auto fail = [&](auto&&... why) { input_error(function, ": ", axis.keyword, ": ", why...); };
  const auto one = [&](nb::handle v) -> Scalar {
    try {
      return checked_scalar(f, v);
    } catch (const InputError& e) {
      const std::string what = e.what();  // "NAME: why", said of the keyword
      input_error(function, ": ", axis.keyword, ": ", what.substr(what.find(": ") + 2));
    }
  };
  const bool scalar = nb::isinstance<nb::str>(h) || nb::isinstance<nb::bytes>(h) ||
                      !PySequence_Check(h.ptr()) ||
                      (nb::hasattr(h, "ndim") && nb::cast<int>(h.attr("ndim")) == 0);
  if (scalar) return {one(h)};
  std::vector<Scalar> out;
  for (nb::handle v : h) out.push_back(one(v));
  if (out.empty()) fail("an empty list (give one value or a non-empty list)");
  if (axis.refuse_repeats)
    for (std::size_t i = 0; i < out.size(); ++i)
      for (std::size_t j = 0; j < i; ++j)
        if (out[i] == out[j])
          fail(f.text(out[i]), " is listed twice (each value is measured once)");
  return out;
}

class MacKeywords {
 public:
  // `axes` in sweep order (the first outermost); `others`: the function's keywords that are
  // not MAC settings, named when an unknown keyword is refused.
  MacKeywords(const char* function, std::vector<Axis> axes, std::vector<std::string> others)
      : function_(function), axes_(std::move(axes)), others_(std::move(others)) {
    for (const Axis& a : axes_)
      MACTUNE_CHECK(find_field<MacParams>(a.row) != nullptr, "no MAC setting '", a.row, "'");
    // A row named as one of the function's own keywords would never reach **kwargs.
    for (const MacField& f : fields_of<MacParams>())
      MACTUNE_CHECK(std::find(others_.begin(), others_.end(), f.name) == others_.end(), function_,
                    ": the MAC setting '", f.name, "' is also a keyword of its own");
  }

  // The MAC settings of a call: `defaults` with the rows `kw` names set, each read and checked
  // by its row (InputError "FUNCTION: NAME: why"); an unknown keyword is an InputError listing
  // the accepted ones. A row's earlier spelling (its aliases) is read with a DeprecationWarning.
  MacKeywordValues read(const nb::kwargs& kw, const MacParams& defaults) const {
    MacKeywordValues out{defaults, {}};
    std::vector<std::pair<std::string, std::string>> seen;  // row, keyword
    for (auto [key, value] : kw) {
      const std::string k = nb::cast<std::string>(key);
      const Axis* axis = axis_named(k);
      const MacField* f = find_field<MacParams>(axis ? axis->row : std::string_view(k));
      if (f == nullptr)
        input_error(function_, ": unknown keyword '", k, "' (keywords: ", keyword_list(), ")");
      if (!axis) axis = axis_of(f->name);
      if (k != f->name && !(axis && k == axis->keyword)) {  // a row's earlier spelling
        const std::string msg = std::string(function_) + "(" + k + "=...) is deprecated: use " +
                                (axis ? axis->keyword : std::string(f->name));
        if (PyErr_WarnEx(PyExc_DeprecationWarning, msg.c_str(), 1) != 0) throw nb::python_error();
      }
      for (const auto& [row, as] : seen)
        if (row == f->name) input_error(function_, ": ", as, " and ", k, " name the same setting");
      seen.emplace_back(std::string(f->name), k);
      if (axis && axis->defaults.empty() && value.is_none()) continue;  // None: the default
      if (axis) {
        out.axes.emplace_back(f, axis_values(function_, *f, *axis, value));
        continue;
      }
      try {
        f->set(out.base, checked_scalar(*f, value));
      } catch (const InputError& e) {
        input_error(function_, ": ", e.what());
      }
    }
    // In sweep order, whatever the order of the keywords.
    std::stable_sort(out.axes.begin(), out.axes.end(), [this](const auto& a, const auto& b) {
      return axis_of(a.first->name) < axis_of(b.first->name);
    });
    return out;
  }

  const std::vector<Axis>& axes() const { return axes_; }

  // The values an axis runs: those given, else its defaults (empty: the library's own).
  std::vector<Scalar> values(const MacKeywordValues& given, std::string_view row) const {
    if (const std::vector<Scalar>* v = given.axis(row)) return *v;
    return axis_of(row)->defaults;
  }

  // "K: int | Sequence[int] = 512, r: ..., group_hits: bool = False": the MAC keywords in
  // table order, for the function's signature (nb::sig; the stubs and help() show it).
  std::string signature(const MacParams& defaults) const {
    std::string out;
    for (const MacField& f : fields_of<MacParams>()) {
      const Axis* axis = axis_of(f.name);
      std::string one = python_type(f);
      std::string shown = repr(f.get(defaults));
      if (axis) {
        one += " | Sequence[" + one + "]";
        if (axis->defaults.empty()) {
          one += " | None";
          shown = "None";
        } else if (axis->defaults.size() == 1) {
          shown = repr(axis->defaults.front());
        } else {
          shown = nb::cast<std::string>(nb::repr(nb::cast(axis->defaults)));
        }
      }
      out += (out.empty() ? "" : ", ") + (axis ? axis->keyword : std::string(f.name)) + ": " + one +
             " = " + shown;
    }
    return out;
  }

  // "MacParams' own" or "MacParams' own but min_context 0": how `defaults` differs from
  // MacParams{}, for the docstring.
  static std::string defaults_text(const MacParams& defaults) {
    std::string but;
    for (const MacField& f : fields_of<MacParams>())
      if (f.get(defaults) != f.get(MacParams{}))
        but += (but.empty() ? " but " : ", ") + std::string(f.name) + " " + f.text_of(defaults);
    return "MacParams' own" + but;
  }

  // One line per MAC keyword: its row's help and the values it takes, for the docstring;
  // `list` follows an axis's line ("a list sweeps").
  std::string doc(std::string_view list) const {
    std::string out;
    for (const MacField& f : fields_of<MacParams>()) {
      const Axis* axis = axis_of(f.name);
      out += "\n  " + (axis ? axis->keyword : std::string(f.name)) + ": " + std::string(f.help);
      if (f.type == FieldType::integer || f.type == FieldType::real)
        out += "; " + f.bounds.requirement(f.type == FieldType::integer);
      else if (f.type == FieldType::choice)
        out += "; one of " + f.choice_list();
      if (axis) out += " (" + std::string(list) + ")";
    }
    return out;
  }

 private:
  const Axis* axis_named(std::string_view keyword) const {
    for (const Axis& a : axes_)
      if (a.keyword == keyword || a.row == keyword) return &a;
    return nullptr;
  }
  const Axis* axis_of(std::string_view row) const {
    for (const Axis& a : axes_)
      if (a.row == row) return &a;
    return nullptr;
  }
  std::string keyword_list() const {
    std::string out;
    for (const std::string& o : others_) out += (out.empty() ? "" : ", ") + o;
    for (const MacField& f : fields_of<MacParams>()) {
      const Axis* axis = axis_of(f.name);
      out += ", " + (axis ? axis->keyword : std::string(f.name));
    }
    return out;
  }
  static std::string python_type(const MacField& f) {
    switch (f.type) {
      case FieldType::integer:
        return "int";
      case FieldType::real:
        return "float";
      case FieldType::boolean:
        return "bool";
      default:
        return "str";
    }
  }
  static std::string repr(const Scalar& v) { return nb::cast<std::string>(nb::repr(nb::cast(v))); }

  const char* function_;
  std::vector<Axis> axes_;
  std::vector<std::string> others_;
};

// The Scalars of an axis as the typed list a library option holds.
template <class T>
std::vector<T> typed(const std::vector<Scalar>& values) {
  std::vector<T> out;
  for (const Scalar& v : values) out.push_back(detail::from_scalar<T>(v));
  return out;
}
template <class T>
std::vector<Scalar> scalars(const std::vector<T>& values) {
  std::vector<Scalar> out;
  for (const T& v : values) out.push_back(detail::to_scalar(v));
  return out;
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

// Everything in ReplaySettings but the MAC settings.
ReplaySettings base_settings(const MacParams& mac, const std::string& kv_dtype,
                             const std::string& engine, int threads, bool baseline) {
  ReplaySettings s;
  s.mac = mac;
  s.kv_dtype = parse_dtype(kv_dtype);
  s.engine = parse_enum<replay::ReplayEngine>(engine);
  s.threads = threads;
  s.baseline = baseline;
  return s;
}

}  // namespace

void bind_replay(nb::module_& m) {
  // Today's defaults, each from where the library keeps it: MacParams' own but min_context 0
  // (ReplaySettings::replay_defaults: a trace replays from its first step), the KV dtype and
  // engine of ReplaySettings, calibrate's lists of CalibrationOptions.
  const ReplaySettings defaults;
  const std::string default_kv_dtype(dtype_name(defaults.kv_dtype)),
      default_engine(name_of(defaults.engine));
  const auto swept = [&](std::string_view row) {
    return Axis{row, std::string(row), {find_field<MacParams>(row)->get(defaults.mac)}};
  };
  const auto quoted = [](const std::string& s) { return "'" + s + "'"; };

  const MacKeywords replay_keywords(
      "replay", {swept("K"), swept("r"), swept("tau")},
      {"layers", "kv_dtype", "engine", "threads", "baseline", "rope_theta"});
  const std::string replay_sig =
      "def replay(trace: object, *, layers: Sequence[int] | None = None, " +
      replay_keywords.signature(defaults.mac) + ", kv_dtype: str = " + quoted(default_kv_dtype) +
      ", engine: str = " + quoted(default_engine) +
      ", threads: int = 0, baseline: bool = False, rope_theta: float | None = None) -> dict";
  const std::string replay_doc =
      "Replays a decode trace through MAC-Attention, as `mactune replay`: every position of "
      "each layer (default: all the trace holds) is one decode step. Returns the --json "
      "document as a dict: {'trace', 'path', 'sha256', 'rope_theta', 'layers': [{layer, "
      "engine, instance, K, r, tau, ... (every MAC setting), kv_dtype, steps, hit_rate, "
      "skip_ratio, rel_err {mean, p50, p99, max, frac_gt_0.1, pairs}, rel_err_vs_ref, "
      "full_vs_ref_max, seconds}]}.\n\n"
      "MAC settings: one keyword per row of MacParams' field table (the CLI's flags), each read "
      "and checked by its row; K, r and tau take a value or a list (their cross product is "
      "swept, K outermost), the others one value; defaults: " +
      MacKeywords::defaults_text(defaults.mac) +
      " (a trace replays from its first step):" + replay_keywords.doc("a list sweeps") +
      "\n\nlayers: None (every layer) or a list; kv_dtype: KV storage (f32, bf16, f16); engine: "
      "cpu or ref (the fp64 reference); threads: 0 = all; baseline: the engine's plain full "
      "attention instead of MAC (checks it against o_ref); rope_theta: None = the trace's "
      "metadata. An unknown keyword is an InputError listing the accepted ones.";
  m.def(
      "replay",
      [keywords = replay_keywords](nb::handle trace_path, std::optional<std::vector<int>> layers,
                                   const std::string& kv_dtype, const std::string& engine,
                                   int threads, bool baseline, std::optional<double> rope_theta,
                                   const nb::kwargs& mac) {
        const MacKeywordValues given = keywords.read(mac, ReplaySettings::replay_defaults());
        const DecodeTrace trace = DecodeTrace::open(fspath(trace_path), rope_theta);
        const std::vector<int> ls = layer_list(layers) ? *layers : trace.layers();
        for (int l : ls) trace.require_layer(l);
        // The cross product of the axes over the other settings, the first axis outermost.
        std::vector<ReplaySettings> grid{
            base_settings(given.base, kv_dtype, engine, threads, baseline)};
        for (const Axis& axis : keywords.axes()) {
          const MacField& f = *find_field<MacParams>(axis.row);
          std::vector<ReplaySettings> next;
          for (const ReplaySettings& s : grid)
            for (const Scalar& v : keywords.values(given, axis.row)) {
              next.push_back(s);
              f.set(next.back().mac, v);
            }
          grid = std::move(next);
        }
        for (const ReplaySettings& s : grid) require_valid(s.mac);
        std::vector<replay::ReplayPoint> points;
        {
          nb::gil_scoped_release unlocked;
          points = replay::replay_trace(trace, ls, grid);
        }
        return parse_json(replay::replay_json(trace, points));
      },
      nb::arg("trace"), nb::kw_only(), nb::arg("layers").none() = nb::none(),
      nb::arg("kv_dtype") = default_kv_dtype, nb::arg("engine") = default_engine,
      nb::arg("threads") = 0, nb::arg("baseline") = false,
      nb::arg("rope_theta").none() = nb::none(), nb::arg("mac"), nb::sig(replay_sig.c_str()),
      replay_doc.c_str());

  const replay::CalibrationOptions calibration;
  const MacKeywords calibrate_keywords(
      "calibrate",
      {Axis{"K", "K", scalars(calibration.ring_capacities)},
       Axis{"r", "r", scalars(calibration.bands)},
       Axis{"accept_eps", "accept_eps", scalars(calibration.accept_eps)},
       // None: replay::default_calibration_taus(); repeats are refused by the library.
       Axis{"tau", "taus", {}, false}},
      {"max_err", "metric", "against_ref", "layers", "kv_dtype", "engine", "threads", "rope_theta",
       "output"});
  const std::string calibrate_sig =
      "def calibrate(traces: object, *, max_err: float, metric: str = " +
      quoted(calibration.metric) +
      ", against_ref: bool = False, layers: Sequence[int] | None = None, " +
      calibrate_keywords.signature(calibration.base.mac) +
      ", kv_dtype: str = " + quoted(default_kv_dtype) +
      ", engine: str = " + quoted(default_engine) +
      ", threads: int = 0, rope_theta: float | None = None, output: object | None = None) -> "
      "dict";
  std::string default_taus;
  for (double t : replay::default_calibration_taus())
    default_taus += (default_taus.empty() ? "" : ", ") + format_real(t);
  const std::string calibrate_doc =
      "Per layer, the point of K x r x accept_eps x taus with the largest skip ratio whose "
      "error metric stays within max_err, over one trace or a list (errors pooled), as "
      "`mactune calibrate`. Returns its --json document as a dict ({'traces', 'metric', "
      "'max_err', 'against_ref', 'layers': [{layer, traces, pick, chosen, points}]}) plus "
      "'schedule': the YAML text, also written to `output` when given "
      "(replay::load_layer_schedule reads it).\n\n"
      "MAC settings: one keyword per row of MacParams' field table (the CLI's flags), each read "
      "and checked by its row; K, r, accept_eps and taus (also spelt tau) take a value or a "
      "list of values to try, the others one value; defaults: " +
      MacKeywords::defaults_text(calibration.base.mac) + ", taus None = [" + default_taus +
      "]:" + calibrate_keywords.doc("a list: the values to try") +
      "\n\nmetric: p99, mean, p50, max or frac_gt_0.1; against_ref: budget the error against "
      "the trace's o_ref instead of exact attention; layers: None (every layer of any trace) or "
      "a list; kv_dtype, engine, threads, rope_theta: as replay's. An unknown keyword is an "
      "InputError listing the accepted ones.";
  m.def(
      "calibrate",
      [keywords = calibrate_keywords](nb::handle traces, double max_err, const std::string& metric,
                                      bool against_ref, std::optional<std::vector<int>> layers,
                                      const std::string& kv_dtype, const std::string& engine,
                                      int threads, std::optional<double> rope_theta,
                                      nb::handle output, const nb::kwargs& mac) {
        const MacKeywordValues given = keywords.read(mac, ReplaySettings::replay_defaults());
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
        opt.base = base_settings(given.base, kv_dtype, engine, threads, false);
        opt.ring_capacities = typed<int>(keywords.values(given, "K"));
        opt.bands = typed<int>(keywords.values(given, "r"));
        opt.accept_eps = typed<double>(keywords.values(given, "accept_eps"));
        if (const std::vector<Scalar>* taus = given.axis("tau")) opt.taus = typed<double>(*taus);
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
      nb::arg("traces"), nb::kw_only(), nb::arg("max_err"), nb::arg("metric") = calibration.metric,
      nb::arg("against_ref") = false, nb::arg("layers").none() = nb::none(),
      nb::arg("kv_dtype") = default_kv_dtype, nb::arg("engine") = default_engine,
      nb::arg("threads") = 0, nb::arg("rope_theta").none() = nb::none(),
      nb::arg("output").none() = nb::none(), nb::arg("mac"), nb::sig(calibrate_sig.c_str()),
      calibrate_doc.c_str());

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
