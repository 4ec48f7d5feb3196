// The core value types (kernels/problem.h, forced.h, stats.h, device.h, instance.h) and the
// array checks every binding uses.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "kernels/device.h"
#include "kernels/forced.h"
#include "kernels/instance.h"
#include "kernels/problem.h"
#include "kernels/stats.h"
#include "python/src/common.h"

namespace mactune::py {

std::string shape_text(const AnyArray& a) {
  std::ostringstream o;
  o << '[';
  for (std::size_t i = 0; i < a.ndim(); ++i) o << (i ? ", " : "") << a.shape(i);
  o << ']';
  return o.str();
}

std::string shape_text(std::initializer_list<std::int64_t> shape) {
  std::ostringstream o;
  o << '[';
  bool first = true;
  for (std::int64_t s : shape) {
    o << (first ? "" : ", ");
    if (s == kAnyExtent)
      o << '*';
    else
      o << s;
    first = false;
  }
  o << ']';
  return o.str();
}

namespace {

std::string dtype_text(nb::dlpack::dtype t) {
  const char* kind = t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float)  ? "float"
                     : t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int)  ? "int"
                     : t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt) ? "uint"
                     : t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat)
                         ? "bfloat"
                     : t.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bool) ? "bool"
                                                                                         : "?";
  return std::string(kind) + std::to_string(t.bits);
}

bool c_contiguous(const AnyArray& a) {
  std::int64_t expect = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

}  // namespace

void check_f32(const AnyArray& a, const char* what, std::initializer_list<std::int64_t> shape,
               const char* dims, int device_type) {
  if (a.device_type() != device_type)
    input_error(what, ": the array is on device type ", a.device_type(), ", expected ",
                device_type == nb::device::cpu::value ? "host memory (cpu)" : "a CUDA device");
  if (a.dtype() != nb::dtype<float>())
    input_error(what, ": expected float32, got ", dtype_text(a.dtype()),
                " (convert once, e.g. .astype(np.float32) or .float(): mactune never copies "
                "silently)");
  bool ok = a.ndim() == shape.size();
  std::size_t i = 0;
  for (std::int64_t s : shape) {
    if (!ok) break;
    ok = s == kAnyExtent || static_cast<std::int64_t>(a.shape(i)) == s;
    ++i;
  }
  if (!ok)
    input_error(what, ": expected shape ", shape_text(shape), " ", dims, ", got ", shape_text(a));
  if (!c_contiguous(a))
    input_error(what, ": the array must be C-contiguous (np.ascontiguousarray / .contiguous())");
}

AnyArray array_arg(nb::handle h, const char* what) {
  AnyArray a;
  if (nb::try_cast(h, a)) return a;
  input_error(what, ": expected a float32 array (numpy, or a torch CPU tensor), got ",
              nb::cast<std::string>(nb::str(h.type().attr("__name__"))),
              nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)
                  ? " (convert once: numpy.asarray(x, dtype=numpy.float32); mactune never copies "
                    "silently)"
                  : "");
}

void check_finite(const AnyArray& a, const char* what) {
  if (a.device_type() != nb::device::cpu::value) return;  // a device buffer: not readable here
  const std::span<const float> x = f32_span(a);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isfinite(x[i])) continue;
    std::ostringstream at;
    std::size_t rest = i, stride = x.size();
    for (std::size_t d = 0; d < a.ndim(); ++d) {
      stride /= std::max<std::size_t>(a.shape(d), 1);
      at << (d ? ", " : "") << rest / std::max<std::size_t>(stride, 1);
      rest %= std::max<std::size_t>(stride, 1);
    }
    input_error(what, ": ", x[i], " at [", at.str(), "]: inputs must be finite");
  }
}

void bind_types(nb::module_& m) {
  {
    nb::class_<Problem> c(
        m, "Problem",
        "One layer's decode step: q [batch, q_heads, head_dim], KV [.., kv_heads, "
        "head_dim] in pages of page_size tokens.");
    // The fields of Problem's table (dtype, as in specs and tables; kv_dtype until 0.x+1).
    Fields<Problem>(c, "Problem").table().deprecated_alias("kv_dtype", "dtype").finish();
    c.def_prop_ro("group_size", &Problem::group_size, "G = q_heads / kv_heads");
    c.def_prop_ro("scale", &Problem::scale, "softmax scale 1/sqrt(head_dim)");
    c.def(
        "validate", [](const Problem& p) { return validate(p); },
        "'' when valid, else one sentence naming the bad value.");
  }
  {
    nb::class_<MacParams> c(m, "MacParams",
                            "MAC-Attention settings of one layer (DESIGN.md section 1); defaults "
                            "are the reference's.");
    // The fields of MacParams' table: K and r as in specs, tables and the CLI (ring_capacity
    // and band, the names of earlier releases, warn).
    Fields<MacParams>(c, "MacParams")
        .table()
        .deprecated_alias("ring_capacity", "K")
        .deprecated_alias("band", "r")
        .finish();
    c.def(
        "validate", [](const MacParams& p) { return validate(p); },
        "'' when valid, else one sentence naming the bad value.");
  }
  {
    nb::class_<LagDistribution> c(m, "LagDistribution",
                                  "lag = m - p of a forced hit: 'fixed' a; 'uniform' in [a, b]; "
                                  "'normal' (mean a, sd b).");
    Fields<LagDistribution>(c, "LagDistribution")
        .text(
            "kind", [](const LagDistribution& l) { return std::string(name_of(l.kind)); },
            [](LagDistribution& l, std::string_view s) { l.kind = parse_enum<LagKind>(s); },
            "'fixed' | 'uniform' | 'normal'")
        .add("a", &LagDistribution::a, "fixed lag, lower bound, or mean")
        .add("b", &LagDistribution::b, "upper bound or standard deviation")
        .finish();
  }
  {
    nb::class_<ForcedHits> c(m, "ForcedHits",
                             "Benchmark mode: an exact hit quota per step; the real match scan "
                             "still runs (kernels/forced.h).");
    // The table's settings, but lag as the bound LagDistribution struct (its text form,
    // "uniform(1,64)", is the spec's); enabled and seed are not settings (no table rows).
    Fields<ForcedHits>(c, "ForcedHits")
        .add("enabled", &ForcedHits::enabled, "force the decisions")
        .table({"lag"})
        .add("lag", &ForcedHits::lag, "LagDistribution of m - p")
        .add("seed", &ForcedHits::seed, "draws are pure functions of (seed, step, unit)")
        .finish();
  }
  {
    nb::class_<StepStats> c(m, "StepStats", "Totals of one step (or of a prefill's steps).");
    Fields<StepStats>(c, "StepStats")
        .add("kv_tokens_read", &StepStats::kv_tokens_read, "sum over groups of kv_len - begin")
        .add("kv_tokens_total", &StepStats::kv_tokens_total, "sum over groups of kv_len")
        .add("head_tokens_read", &StepStats::head_tokens_read, "per query head")
        .add("head_tokens_total", &StepStats::head_tokens_total, "per query head")
        .add("kv_bytes_read", &StepStats::kv_bytes_read, "modeled")
        .add("ring_bytes_read", &StepStats::ring_bytes_read, "modeled")
        .add("bytes_written", &StepStats::bytes_written, "modeled")
        .add("eligible_heads", &StepStats::eligible_heads, "")
        .add("hit_heads", &StepStats::hit_heads, "")
        .add("gate_rejections", &StepStats::gate_rejections, "")
        .add("guard_fires", &StepStats::guard_fires, "")
        .add("eligible_groups", &StepStats::eligible_groups, "")
        .add("groups_all_hit", &StepStats::groups_all_hit, "")
        .add("groups_mixed", &StepStats::groups_mixed, "")
        .add("groups_all_miss", &StepStats::groups_all_miss, "")
        .finish();
    c.def_prop_ro("skip_ratio", &StepStats::skip_ratio, "1 - KV tokens read / sum of kv_len");
    c.def_prop_ro("head_skip_ratio", &StepStats::head_skip_ratio, "the same per query head");
    c.def_prop_ro("modeled_bytes", &StepStats::modeled_bytes, "KV + ring read + written");
    c.def_prop_ro(
        "hit_rate",
        [](const StepStats& s) {
          return s.eligible_heads ? double(s.hit_heads) / double(s.eligible_heads) : 0.0;
        },
        "hit heads / eligible heads");
  }
  {
    nb::class_<DeviceFingerprint> c(m, "DeviceFingerprint",
                                    "What a measurement and a dispatch table were taken on.");
    Fields<DeviceFingerprint>(c, "DeviceFingerprint")
        .text(
            "backend", [](const DeviceFingerprint& d) { return std::string(name_of(d.backend)); },
            [](DeviceFingerprint& d, std::string_view s) { d.backend = parse_enum<Backend>(s); },
            "'cpu' or 'cuda'")
        .add("name", &DeviceFingerprint::name, "CPU model or GPU name")
        .add("compute_units", &DeviceFingerprint::compute_units, "logical CPUs or SMs")
        .add("memory_mib", &DeviceFingerprint::memory_mib, "rounded down to 1 GiB")
        .add("arch", &DeviceFingerprint::arch, "'avx512' / 'avx2' / 'generic' or 'sm_90'")
        .add("runtime", &DeviceFingerprint::runtime, "driver / runtime versions")
        .add("threads", &DeviceFingerprint::threads, "worker threads (CPU)")
        .finish();
    c.def("key", &DeviceFingerprint::key, "stable identity");
    c.def("digest", &DeviceFingerprint::digest, "short hex digest of key(): tables' fingerprint");
  }
  m.def("cpu_fingerprint", &cpu_fingerprint, nb::arg("threads") = 0,
        "The CPU this process runs on, with `threads` workers (0: all logical CPUs).");
  {
    nb::class_<InstanceDesc> c(m, "InstanceDesc",
                               "One compiled kernel instance, as its engine describes it.");
    Fields<InstanceDesc>(c, "InstanceDesc")
        .add("name", &InstanceDesc::name, "canonical name")
        .text(
            "backend", [](const InstanceDesc& d) { return std::string(name_of(d.backend)); },
            [](InstanceDesc& d, std::string_view s) { d.backend = parse_enum<Backend>(s); },
            "'cpu' | 'cuda'")
        .text(
            "family", [](const InstanceDesc& d) { return std::string(name_of(d.family)); },
            [](InstanceDesc& d, std::string_view s) { d.family = parse_enum<Family>(s); },
            "'mac' | 'full' | 'match' | 'attend' | 'merge'")
        .add("config", &InstanceDesc::config, "the config fields, 'key=value,...'")
        .finish();
    c.def(
        "can_implement",
        [](const InstanceDesc& d, const Problem& p) {
          return d.can_implement ? d.can_implement(p) : std::string();
        },
        "'' when the instance runs the shape on this machine, else why not.");
  }
}

}  // namespace mactune::py
