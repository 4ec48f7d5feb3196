// Dispatch tables at run time (dispatcher/dispatch.h): load a table, select a choice.
//
//   d = mactune.Dispatcher("dispatch/cpu-quick.json")        # refused -> one warning, fallback
//   c = d.select(mactune.Problem(batch=1, q_heads=32, kv_heads=8, head_dim=128), 32768, 0.9)
//   if c.use_mac: run_mac(c.mac.instance, c.mac.K, c.mac.r, c.mac.params)

#include "dispatcher/catalog.h"
#include "dispatcher/dispatch.h"
#include "python/src/common.h"

namespace mactune::py {
namespace {

using dispatch::Choice;
using dispatch::Dispatcher;
using dispatch::FullChoice;
using dispatch::LoadOptions;
using dispatch::MacChoice;

// A refusal goes to `warn` (a Python callable) when given, else to stderr as in C++. A table
// is refused only while it loads, so the callable is held only for the load (`Loading`): a
// Dispatcher that kept it (inside its C++ options, where Python's collector cannot see) would
// keep alive whatever the callable holds, itself included (`warn=lambda l: log(d, l)`), and
// nanobind would report the instance leaked at exit.
struct Loading {
  std::shared_ptr<nb::object> warn = std::make_shared<nb::object>();
  LoadOptions options;
  ~Loading() { *warn = nb::object(); }  // with the GIL: every caller below holds it
};

void load_options(Loading& l, bool check_device, const std::optional<DeviceFingerprint>& device,
                  nb::object warn) {
  l.options.check_device = check_device;
  if (device) l.options.device = *device;
  if (!warn.is_none()) {
    if (!PyCallable_Check(warn.ptr()))
      input_error("warn: expected a callable taking one line (str), got ",
                  nb::cast<std::string>(nb::str(warn.type().attr("__name__"))));
    *l.warn = std::move(warn);
    l.options.warn = [held = std::weak_ptr<nb::object>(l.warn)](std::string_view line) {
      if (const auto w = held.lock(); w && w->is_valid()) (*w)(std::string(line));
    };
  }
}

// Dispatcher::select's arguments checked where they enter from Python: the C++ function is
// pure and total (a NaN hit rate means "unknown": full attention), but from a caller a NaN,
// a rate outside [0, 1], a negative context or an invalid shape is a bug to name.
void check_select(const Problem& p, std::int64_t context, double hit_rate) {
  if (const std::string why = validate(p); !why.empty()) input_error("problem: ", why);
  if (context < 1 || context > kMaxContext)
    input_error("context: ", context, " must be in [1, ", kMaxContext,
                "] (KV tokens per request, the current one included)");
  if (!(hit_rate >= 0.0 && hit_rate <= 1.0))
    input_error("expected_hit_rate: ", hit_rate, " must be in [0, 1]");
}

nb::object json_to_python(const std::string& text) {
  return nb::module_::import_("json").attr("loads")(text);
}

}  // namespace

void bind_dispatch(nb::module_& m) {
  nb::class_<FullChoice>(m, "FullChoice", "Full attention: the baseline instance.")
      .def_ro("instance", &FullChoice::instance, "canonical instance name")
      .def_ro("params", &FullChoice::params, "launch parameters not in the name")
      .def("__repr__", [](const FullChoice& f) { return "FullChoice(" + f.instance + ")"; });
  nb::class_<MacChoice>(m, "MacChoice", "MAC-Attention: the instance and its ring settings.")
      .def_ro("instance", &MacChoice::instance, "canonical instance name")
      .def_ro("K", &MacChoice::ring_capacity, "K it was measured with (the table's mac.K)")
      .def_ro("r", &MacChoice::band, "r it was measured with (the table's mac.r)")
      .def_prop_ro(
          "ring_capacity",
          [](const MacChoice& c) {
            warn_renamed("MacChoice", "ring_capacity", "K");
            return c.ring_capacity;
          },
          "Deprecated: K.")
      .def_prop_ro(
          "band",
          [](const MacChoice& c) {
            warn_renamed("MacChoice", "band", "r");
            return c.band;
          },
          "Deprecated: r.")
      .def_ro("tau", &MacChoice::tau, "tau it was measured with (None: the caller's own)")
      .def_ro("params", &MacChoice::params, "launch parameters not in the name")
      .def(
          "mac_params",
          [](const MacChoice& c, const MacParams& base) {
            MacParams p = dispatch::mac_settings(c, base);  // the MAC table reads params
            require_valid(p);
            return p;
          },
          nb::arg("base") = MacParams{},
          "`base` with this choice's K, r, tau (when the table has one) and every other MAC "
          "setting in its params (summary_dtype, pick, rectify, accept_eps, min_context, "
          "subtract_guard: the fields of MacParams' table): the session settings it was "
          "measured with.")
      .def("__repr__", [](const MacChoice& c) { return "MacChoice(" + c.instance + ")"; });

  nb::class_<Choice>(m, "Choice", "What select() answered: full attention or MAC, and how.")
      .def_prop_ro(
          "source",
          [](const Choice& c) {
            return c.source == dispatch::ChoiceSource::table ? "table" : "fallback";
          },
          "'table' or 'fallback'")
      .def_prop_ro(
          "entry", [](const Choice& c) { return c.entry >= 0 ? nb::cast(c.entry) : nb::none(); },
          "index of the table entry that answered, or None")
      .def_ro("full", &Choice::full, "always set: the full-attention kernel")
      .def_ro("mac", &Choice::mac, "MacChoice when MAC-Attention is the choice, else None")
      .def_ro("min_hit_rate", &Choice::min_hit_rate, "the bucket's break-even hit rate, or None")
      .def_prop_ro("use_mac", &Choice::use_mac, "whether MAC-Attention is the choice")
      .def_prop_ro(
          "instance", [](const Choice& c) { return c.instance(); },
          "the kernel to launch ('' when no instance fits the shape)")
      .def("describe", &dispatch::describe, "one line, as the C++ describe() prints")
      .def("__str__", &dispatch::describe)
      .def("__repr__", [](const Choice& c) { return "<Choice " + dispatch::describe(c) + ">"; });

  nb::class_<Dispatcher>(
      m, "Dispatcher",
      "A dispatch table validated against this device and build (docs/dispatch-table.md). A "
      "table that is unreadable, malformed, from another device or naming an instance this "
      "build lacks is refused with one warning line, and every select() then answers with "
      "the built-in fallback; nothing raises for a bad table.")
      .def(
          "__init__",
          [](Dispatcher* self, nb::handle path, bool check_device,
             std::optional<DeviceFingerprint> device, nb::object warn) {
            Loading l;
            load_options(l, check_device, device, std::move(warn));
            LoadOptions o = l.options;
            if (path.is_none())
              new (self) Dispatcher(std::move(o));
            else
              new (self) Dispatcher(Dispatcher::load(fspath(path), std::move(o)));
          },
          nb::arg("path").none() = nb::none(), nb::kw_only(), nb::arg("check_device") = true,
          nb::arg("device").none() = nb::none(), nb::arg("warn").none() = nb::none(),
          "Loads the table at `path` (None: no table, the fallback only). `device`: the "
          "fingerprint the table must match (default: this CPU; a CUDA engine passes "
          "mactune.cuda.device_fingerprint()). `warn(line)` receives a refusal instead of "
          "stderr.")
      .def_static(
          "from_text",
          [](const std::string& text, const std::string& origin, bool check_device,
             std::optional<DeviceFingerprint> device, nb::object warn) {
            Loading l;
            load_options(l, check_device, device, std::move(warn));
            return Dispatcher::from_text(text, origin, l.options);
          },
          nb::arg("text"), nb::arg("origin") = "<text>", nb::kw_only(),
          nb::arg("check_device") = true, nb::arg("device").none() = nb::none(),
          nb::arg("warn").none() = nb::none(), "The same over JSON text.")
      .def(
          "select",
          [](const Dispatcher& d, const Problem& p, std::int64_t context, double hit_rate) {
            check_select(p, context, hit_rate);
            return d.select(p, context, hit_rate);
          },
          nb::arg("problem"), nb::arg("context"), nb::arg("expected_hit_rate"),
          "The choice for `problem` at `context` KV tokens per request (a mixed batch: the "
          "mean) and the per-head hit rate the engine expects: a pure function of the table.")
      .def_prop_ro("refusal", &Dispatcher::refusal, "'' unless a table was refused: its line")
      .def_prop_ro(
          "backend", [](const Dispatcher& d) { return std::string(name_of(d.backend())); },
          "the device's backend ('cpu' or 'cuda')")
      .def_prop_ro(
          "table",
          [](const Dispatcher& d) {
            return d.table() ? json_to_python(dispatch::to_json(*d.table())) : nb::none();
          },
          "the accepted table as a dict (its JSON), or None")
      .def_prop_ro(
          "instances", [](const Dispatcher& d) { return d.catalog().instances(); },
          "the catalog: instances a table may name, in fallback preference order");

  m.def(
      "instances", [] { return dispatch::default_catalog().instances(); },
      "Every kernel instance this build holds (CPU first, widest ISA first; then CUDA).");
}

}  // namespace mactune::py
