#include "tuner/axes.h"

#include <cstdio>
#include <sstream>

#include "kernels/dtype.h"
#include "kernels/problem.h"
#include "tuner/expr.h"

namespace mactune::tuner {
namespace {

std::string dtype_any(const std::string& s) {
  return std::string(dtype_name(parse_dtype(s)));
}
std::string dtype_summary(const std::string& s) {
  const DType t = parse_dtype(s);
  if (t == DType::f16) input_error("summary dtype f16 is not supported (use bf16 or f32)");
  return std::string(dtype_name(t));
}
std::string pick_any(const std::string& s) {
  return std::string(pick_rule_name(parse_pick_rule(s)));
}
std::string rectify_any(const std::string& s) {
  return std::string(rectify_name(parse_rectify(s)));
}
std::string coherence_any(const std::string& s) {
  return std::string(coherence_name(parse_coherence(s)));
}
std::string lag_any(const std::string& s) {
  return lag_text(parse_lag(s));
}
std::string isa_any(const std::string& s) {
  if (s == "auto" || s == "avx512" || s == "avx2" || s == "generic") return s;
  input_error("unknown isa '", s, "' (expected auto, avx512, avx2 or generic)");
}

std::string instance_any(const std::string& s) {
  const bool ok = !s.empty() &&
                  s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
  if (!ok) input_error("'", s, "' is not an instance name (lower case, digits, '_') or auto");
  return s;
}
std::string bool_any(const std::string& s) {
  if (s == "true" || s == "yes" || s == "on") return "true";
  if (s == "false" || s == "no" || s == "off") return "false";
  input_error("expected true or false, got '", s, "'");
}

constexpr double kBig = 1e9;

}  // namespace

const std::vector<AxisDef>& axis_defs() {
  using K = AxisKind;
  using S = Section;
  static const std::vector<AxisDef> defs = {
      // Shape of the step: one dispatch-table bucket per (shape, batch, context).
      {"head_dim", S::workload, K::integer, {"128"}, 2, 1024, {}, "D, the head dimension"},
      {"q_heads", S::workload, K::integer, {"32"}, 1, 4096, {}, "Hq, query heads per layer"},
      {"kv_heads", S::workload, K::integer, {"8"}, 1, 4096, {}, "Hkv, KV heads per layer"},
      {"dtype", S::workload, K::text, {"bf16"}, 0, 0, dtype_any, "KV cache dtype: f32, f16, bf16"},
      {"page_size", S::workload, K::integer, {"16"}, 1, 65536, {}, "tokens per KV page"},
      {"context",
       S::workload,
       K::integer,
       {"4096"},
       1,
       double(kMaxContext),
       {},
       "tokens already in the KV cache of each request (the step is at position m = context)"},
      {"batch", S::workload, K::integer, {"1"}, 1, 65536, {}, "requests per decode step"},
      // CPU launch parameters (not compiled in: they travel as `params`).
      {"isa", S::cpu, K::text, {"auto"}, 0, 0, isa_any, "vector ISA: auto, avx512, avx2, generic"},
      {"threads", S::cpu, K::integer, {"0"}, 0, 4096, {}, "worker threads (0: all logical CPUs)"},
      {"chunk_tokens", S::cpu, K::integer, {"256"}, 1, kBig, {}, "minimum KV tokens per work item"},
      {"block_rows", S::cpu, K::integer, {"16"}, 1, 4096, {}, "KV rows per inner block"},
      // CUDA instances ("auto": the first built instance that can run the shape) and launch
      // parameters (kernels/cuda/session.h EngineConfig).
      {"attend", S::cuda, K::text, {"auto"}, 0, 0, instance_any, "attend instance (MAC)"},
      {"full", S::cuda, K::text, {"auto"}, 0, 0, instance_any, "full-attention instance"},
      {"match", S::cuda, K::text, {"auto"}, 0, 0, instance_any, "match instance"},
      {"merge", S::cuda, K::text, {"auto"}, 0, 0, instance_any, "merge instance"},
      {"min_chunk", S::cuda, K::integer, {"128"}, 1, kBig, {}, "smallest KV chunk of a work item"},
      {"ctas_per_sm", S::cuda, K::integer, {"0"}, 0, 64, {}, "split-KV CTAs per SM (0: occupancy)"},
      {"match_candidates",
       S::cuda,
       K::integer,
       {"0"},
       0,
       1 << 20,
       {},
       "ring candidates per match CTA (0: launch math)"},
      {"graph", S::cuda, K::text, {"false"}, 0, 0, bool_any, "run each step as a CUDA graph"},
      // MAC settings.
      {"summary_dtype", S::mac, K::text, {"f32"}, 0, 0, dtype_summary, "ring summary o: bf16, f32"},
      {"pick",
       S::mac,
       K::text,
       {"nearest"},
       0,
       0,
       pick_any,
       "pick rule: nearest, newest, normalized"},
      {"rectify", S::mac, K::text, {"forward"}, 0, 0, rectify_any, "ring entry: forward, subtract"},
      {"tau", S::mac, K::real, {"0.45"}, 0, 1e6, {}, "match threshold tau (hits are forced)"},
      {"accept_eps", S::mac, K::real, {"1"}, 1e-12, 1, {}, "acceptance gate epsilon (1: off)"},
      {"min_context",
       S::mac,
       K::integer,
       {"0"},
       0,
       double(kMaxContext),
       {},
       "steps below this position are plain misses"},
      {"K", S::mac, K::integer, {"512"}, 1, 1 << 20, {}, "ring capacity per (request, query head)"},
      {"r",
       S::mac,
       K::integer,
       {"256"},
       1,
       double(kMaxContext),
       {},
       "band: tokens always recomputed"},
      // Forced-hit workload (kernels/forced.h): the real match scan runs, the quota decides.
      {"coherence",
       S::workload,
       K::text,
       {"per-head"},
       0,
       0,
       coherence_any,
       "hit units: per-head or per-group"},
      {"lag",
       S::workload,
       K::text,
       {"uniform(1,64)"},
       0,
       0,
       lag_any,
       "distance m - p of a hit: fixed(a), uniform(a,b), normal(mean,sd)"},
      {"hit_rate",
       S::workload,
       K::real,
       {"0", "0.5", "0.9", "1"},
       0,
       1,
       {},
       "fraction of eligible units that hit (exact quota per step)"},
  };
  return defs;
}

const AxisDef* find_axis_def(std::string_view name) {
  for (const AxisDef& d : axis_defs())
    if (d.name == name) return &d;
  return nullptr;
}

std::vector<Axis> default_axes() {
  std::vector<Axis> axes;
  for (const AxisDef& d : axis_defs()) {
    Axis a;
    a.name = std::string(d.name);
    a.section = d.section;
    a.kind = d.kind;
    for (const std::string& t : d.defaults) {
      Value v;
      v.text = t;
      if (d.kind != AxisKind::text) v.num = *parse_number(t);
      a.values.push_back(v);
    }
    axes.push_back(std::move(a));
  }
  return axes;
}

const std::vector<std::string>& derived_names() {
  static const std::vector<std::string> names = {"G"};
  return names;
}

LagDistribution parse_lag(std::string_view text) {
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  auto bad = [&]() -> LagDistribution {
    input_error("bad lag '", text, "' (expected fixed(a), uniform(a,b) or normal(mean,sd))");
  };
  if (open == std::string_view::npos || close != text.size() - 1 || close < open) return bad();
  const std::string_view kind = text.substr(0, open);
  const std::string_view args = text.substr(open + 1, close - open - 1);
  std::vector<double> v;
  std::size_t start = 0;
  while (start <= args.size()) {
    auto comma = args.find(',', start);
    if (comma == std::string_view::npos) comma = args.size();
    std::string_view part = args.substr(start, comma - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    const auto x = parse_number(part);
    if (!x) return bad();
    v.push_back(*x);
    start = comma + 1;
  }
  LagDistribution lag;
  if (kind == "fixed" && v.size() == 1 && v[0] >= 1) {
    lag.kind = LagKind::fixed;
    lag.a = lag.b = v[0];
  } else if (kind == "uniform" && v.size() == 2 && v[0] >= 1 && v[1] >= v[0]) {
    lag.kind = LagKind::uniform;
    lag.a = v[0];
    lag.b = v[1];
  } else if (kind == "normal" && v.size() == 2 && v[0] >= 1 && v[1] >= 0) {
    lag.kind = LagKind::normal;
    lag.a = v[0];
    lag.b = v[1];
  } else {
    return bad();
  }
  return lag;
}

std::string lag_text(const LagDistribution& lag) {
  std::ostringstream t;
  switch (lag.kind) {
    case LagKind::fixed:
      t << "fixed(" << lag.a << ')';
      break;
    case LagKind::uniform:
      t << "uniform(" << lag.a << ',' << lag.b << ')';
      break;
    case LagKind::normal:
      t << "normal(" << lag.a << ',' << lag.b << ')';
      break;
  }
  return t.str();
}

}  // namespace mactune::tuner
