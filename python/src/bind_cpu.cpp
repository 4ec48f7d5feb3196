// mactune.cpu: the CPU decode engine (kernels/cpu/session.h), and the result types both
// engines' sessions return.
//
//   s = mactune.cpu.Session(shape=mactune.Problem(batch=1, q_heads=8, kv_heads=2, head_dim=64,
//                                                  kv_dtype="f32"),
//                           mac=mactune.MacParams(min_context=0))
//   rid = s.add_request()
//   r = s.step(rid, q, k, v)          # q [8, 64], k, v [2, 64] float32: r.out, r.hit, r.stats
#include "kernels/cpu/session.h"
#include "python/src/session_binding.h"

namespace mactune::py {

void add_stats(StepStats& t, const StepStats& s) {
  t.kv_tokens_read += s.kv_tokens_read;
  t.kv_tokens_total += s.kv_tokens_total;
  t.head_tokens_read += s.head_tokens_read;
  t.head_tokens_total += s.head_tokens_total;
  t.kv_bytes_read += s.kv_bytes_read;
  t.ring_bytes_read += s.ring_bytes_read;
  t.bytes_written += s.bytes_written;
  t.eligible_heads += s.eligible_heads;
  t.hit_heads += s.hit_heads;
  t.gate_rejections += s.gate_rejections;
  t.guard_fires += s.guard_fires;
  t.eligible_groups += s.eligible_groups;
  t.groups_all_hit += s.groups_all_hit;
  t.groups_mixed += s.groups_mixed;
  t.groups_all_miss += s.groups_all_miss;
}

namespace {

// A per-head field of the decisions as a numpy array [rows, q_heads].
// (Returned as objects: a property getter's reference_internal policy does not apply to an
// array that owns its buffer.)
template <class T, class F>
nb::object per_head(const StepResult& r, F field) {
  Owned<T> buf = allocate<T>(r.decisions.size());
  for (std::size_t i = 0; i < r.decisions.size(); ++i) buf.data[i] = field(r.decisions[i]);
  return nb::cast(numpy_array(std::move(buf), {r.rows, r.q_heads}));
}
template <class T, class F>
nb::object per_group(const StepResult& r, F field) {
  Owned<T> buf = allocate<T>(r.groups.size());
  for (std::size_t i = 0; i < r.groups.size(); ++i) buf.data[i] = field(r.groups[i]);
  return nb::cast(numpy_array(std::move(buf), {r.rows, r.kv_heads}));
}

}  // namespace

void bind_step_result(nb::module_& m) {
  nb::class_<StepResult>(
      m, "StepResult",
      "Outputs and decisions of a step (rows = requests) or a prefill (rows = positions). "
      "Per-head arrays are [rows, q_heads], per-group arrays [rows, kv_heads].")
      .def_ro("out", &StepResult::out, "float32 [rows, q_heads, head_dim]: the attention output")
      .def_ro("stats", &StepResult::stats, "StepStats: totals over the rows")
      .def_prop_ro(
          "hit",
          [](const StepResult& r) { return per_head<bool>(r, [](auto& d) { return d.hit; }); },
          "bool: the head reused a ring entry")
      .def_prop_ro(
          "eligible",
          [](const StepResult& r) { return per_head<bool>(r, [](auto& d) { return d.eligible; }); },
          "bool: m >= min_context (a match ran)")
      .def_prop_ro(
          "gate_rejected",
          [](const StepResult& r) {
            return per_head<bool>(r, [](auto& d) { return d.gate_rejected; });
          },
          "bool: matched, but the acceptance gate sent it back to a miss")
      .def_prop_ro(
          "p",
          [](const StepResult& r) {
            return per_head<std::int32_t>(r, [](auto& d) { return d.p; });
          },
          "int32: matched position (-1 on a miss)")
      .def_prop_ro(
          "d2",
          [](const StepResult& r) { return per_head<float>(r, [](auto& d) { return d.d2; }); },
          "float32: squared distance of the best candidate")
      .def_prop_ro(
          "start",
          [](const StepResult& r) {
            return per_head<std::int32_t>(r, [](auto& d) { return d.start; });
          },
          "int32: first KV position attended freshly (cache_end(p) on a hit, 0 on a miss)")
      .def_prop_ro(
          "group_mode",
          [](const StepResult& r) {
            return per_group<std::int8_t>(r, [](auto& g) { return std::int8_t(g.mode); });
          },
          "int8: 0 all-hit, 1 mixed, 2 all-miss (mactune.GROUP_MODES names them)")
      .def_prop_ro(
          "group_begin",
          [](const StepResult& r) {
            return per_group<std::int32_t>(r, [](auto& g) { return g.begin; });
          },
          "int32: first KV position the group streams")
      .def_prop_ro(
          "kv_len",
          [](const StepResult& r) {
            return per_group<std::int32_t>(r, [](auto& g) { return g.kv_len; });
          },
          "int32: m + 1 per group");
  m.attr("GROUP_MODES") = nb::make_tuple("all-hit", "mixed", "all-miss");

  nb::class_<RingEntry>(m, "RingEntry", "One ring slot as stored.")
      .def_ro("pos", &RingEntry::pos, "the position it holds (-1: nothing yet)")
      .def_ro("q", &RingEntry::q, "float32 [head_dim]: the pre-RoPE query (KV dtype)")
      .def_ro("o", &RingEntry::o, "float32 [head_dim]: the summary o (summary dtype)")
      .def_ro("lse", &RingEntry::lse, "natural log; -inf for an empty summary")
      .def("__repr__",
           [](const RingEntry& e) { return "RingEntry(pos=" + std::to_string(e.pos) + ")"; });
}

void bind_cpu(nb::module_& m) {
  {
    nb::class_<cpu::EngineConfig> c(m, "EngineConfig",
                                    "CPU launch parameters (not part of instance names).");
    Fields<cpu::EngineConfig>(c, "EngineConfig").table().finish();
  }
  {
    nb::class_<cpu::SessionOptions> c(m, "SessionOptions", "Options of a CPU decode session.");
    Fields<cpu::SessionOptions>(c, "SessionOptions")
        .add("shape", &cpu::SessionOptions::shape, "Problem; shape.batch = request slots")
        .add("mac", &cpu::SessionOptions::mac, "MacParams")
        .add("mac_enabled", &cpu::SessionOptions::mac_enabled,
             "False: the full-attention baseline (no match, no ring)")
        .add("rope_theta", &cpu::SessionOptions::rope_theta, "RoPE base (rotate-half)")
        .add("forced", &cpu::SessionOptions::forced, "ForcedHits (benchmark mode)")
        .add("engine", &cpu::SessionOptions::engine, "EngineConfig")
        .add("max_context", &cpu::SessionOptions::max_context, "KV capacity per request")
        .finish();
    c.def(
        "validate", [](const cpu::SessionOptions& o) { return cpu::validate(o); },
        "'' when the CPU engine takes these options, else one sentence naming the bad value.");
  }
  {
    nb::class_<cpu::Session> c(
        m, "Session",
        "A CPU decode session of one layer: MAC-Attention (or full attention) over a paged KV "
        "cache, batched, GQA, fp32 accumulation; the C++ cpu::Session itself.");
    c.def(
        "__init__",
        [](cpu::Session* self, std::optional<cpu::SessionOptions> options, const nb::kwargs& kw) {
          cpu::SessionOptions o = options ? *options : cpu::SessionOptions{};
          if (kw.size() != 0) {
            if (options) input_error("Session: pass either options= or keyword fields, not both");
            o = nb::cast<cpu::SessionOptions>(nb::type<cpu::SessionOptions>()(**kw));
          }
          nb::gil_scoped_release unlocked;  // starts the thread pool
          new (self) cpu::Session(o);
        },
        nb::arg("options").none() = nb::none(), nb::arg("kwargs"),
        "Session(options) or Session(shape=..., mac=..., ...): the fields of SessionOptions. "
        "Bad options raise InputError naming the value.");
    bind_session_api(c, nb::device::cpu::value);
    c.def_prop_ro("isa", &cpu::Session::isa, "the path that runs: 'avx512', 'avx2' or 'generic'");
    c.def_prop_ro("threads", &cpu::Session::threads, "workers in the pool, the caller included");
    c.def("set_engine", &cpu::Session::set_engine, nb::arg("engine"),
          "New launch parameters between steps (KV and rings untouched).");
    c.def(
        "read_kv",
        [](const cpu::Session& s, int id, int kv_head, int pos) {
          const auto D = std::size_t(s.options().shape.head_dim);
          Owned<float> k = allocate<float>(D), v = allocate<float>(D);
          s.read_kv(id, kv_head, pos, {k.data, D}, {v.data, D});
          return nb::make_tuple(numpy_array(std::move(k), {D}), numpy_array(std::move(v), {D}));
        },
        nb::arg("id"), nb::arg("kv_head"), nb::arg("pos"),
        "(k, v) of (request, KV head, position) as stored: k post-RoPE, float32 [head_dim].");
  }
  m.def("validate", &cpu::validate, nb::arg("options"),
        "'' when the options are valid for the CPU engine, else one sentence.");
  m.def("instances", &cpu::instances, "Every CPU instance this binary runs on this CPU.");
  m.def(
      "instance_name",
      [](bool mac, std::string_view isa, int head_dim, std::string_view kv_dtype) {
        return cpu::instance_name(mac, isa, head_dim, parse_dtype(kv_dtype));
      },
      nb::arg("mac"), nb::arg("isa"), nb::arg("head_dim"), nb::arg("kv_dtype"),
      "The canonical name of one CPU instance.");
}

}  // namespace mactune::py
