// The axes a spec may sweep: every field of the structs a grid point is made of (the shape,
// the MAC settings, the CPU or CUDA engine config, the forced-hit workload; kernels/fields.h),
// lifted into TunePoint, each under its spec section, in grid order. One table, used by the
// YAML reader, the grid, the constraint checker and docs/spec.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tuner/spec/grid.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

struct AxisDef {
  Field<TunePoint> field;  // name, type, range, help; reads and sets a point
  Section section;
  std::vector<Scalar> defaults;  // what the grid takes when the spec does not name the axis

  std::string_view name() const { return field.name; }
};

// Every axis, in grid order (the first is the outermost loop). Hit rate is the innermost axis
// so that consecutive points share a shape and launch parameters (and their baseline session).
const std::vector<AxisDef>& axis_defs();
// The axis `name` of `section` (two engines may both have a field of one name: match_mode).
const AxisDef* find_axis_def(Section section, std::string_view name);
// Every axis with its default values, in grid order.
std::vector<Axis> default_axes();
// Names usable in constraints besides the numeric axes: G = q_heads / kv_heads.
const std::vector<std::string>& derived_names();

}  // namespace mactune::tuner
