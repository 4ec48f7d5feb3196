#include "tuner/spec/axes.h"

#include "kernels/error.h"

namespace mactune::tuner {
namespace {

// Every field of `part`'s table as axes of `section` (all of them, or those in `names`).
template <class Part>
void add_fields(std::vector<AxisDef>& defs, Section section, Part TunePoint::*part,
                std::initializer_list<std::string_view> names = {}) {
  for (Field<TunePoint>& f : lift(fields_of<Part>(), part)) {
    bool wanted = names.size() == 0;
    for (std::string_view n : names) wanted = wanted || n == f.name;
    if (wanted) defs.push_back({f, section, {f.default_value()}});
  }
}

}  // namespace

const std::vector<AxisDef>& axis_defs() {
  static const std::vector<AxisDef> defs = [] {
    using S = Section;
    std::vector<AxisDef> d;
    // Shape of the step: one dispatch-table bucket per (shape, batch, context); the context
    // loops outside the batch.
    add_fields(d, S::workload, &TunePoint::shape,
               {"head_dim", "q_heads", "kv_heads", "dtype", "page_size"});
    d.push_back({field<&TunePoint::context>(
                     "context", "context",
                     "tokens already in the KV cache of each request (the step is at position m "
                     "= context)")
                     .range(1, kMaxContext),
                 S::workload,
                 {std::int64_t{4096}}});
    add_fields(d, S::workload, &TunePoint::shape, {"batch"});
    // Launch parameters (not compiled in: they travel as `params`) and, for CUDA, the
    // instances ("auto": the first built instance that can run the shape).
    add_fields(d, S::cpu, &TunePoint::cpu);
    add_fields(d, S::cuda, &TunePoint::cuda);
    add_fields(d, S::mac, &TunePoint::mac);
    // Forced-hit workload (kernels/forced.h): the real match scan runs, the quota decides.
    // `quota` is no axis: a spec that sweeps skip_ratio gets the skip-ratio quota.
    add_fields(d, S::workload, &TunePoint::forced, {"lag", "coherence", "hit_rate", "skip_ratio"});
    for (AxisDef& a : d) {
      // Hits are forced at the step m = context, so MAC runs at every context by default...
      if (a.name() == "min_context") a.defaults = {std::int64_t{0}};
      // ...and the break-even needs a curve over hit rates.
      if (a.name() == "hit_rate") a.defaults = {0.0, 0.5, 0.9, 1.0};
    }
    return d;
  }();
  return defs;
}

const AxisDef* find_axis_def(Section section, std::string_view name) {
  for (const AxisDef& d : axis_defs())
    if (d.section == section && d.name() == name) return &d;
  return nullptr;
}

std::vector<Axis> default_axes() {
  std::vector<Axis> axes;
  for (const AxisDef& d : axis_defs()) {
    Axis a;
    a.name = std::string(d.name());
    a.section = d.section;
    a.type = d.field.type;
    for (const Scalar& v : d.defaults) {
      const Scalar x = d.field.check(v);
      a.values.push_back({x, d.field.text(x), number_of(x).value_or(0.0)});
    }
    axes.push_back(std::move(a));
  }
  return axes;
}

const std::vector<std::string>& derived_names() {
  static const std::vector<std::string> names = {"G"};
  return names;
}

}  // namespace mactune::tuner
