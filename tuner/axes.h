// The axes a spec may sweep: name, section, type, range, default, and grid order. One table,
// used by the YAML reader, the grid, the constraint checker and docs/spec.md.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/forced.h"
#include "tuner/spec.h"

namespace mactune::tuner {

struct AxisDef {
  std::string_view name;
  Section section;
  AxisKind kind;
  std::vector<std::string> defaults;  // canonical texts of the default values
  double min = 0, max = 0;            // numeric range (inclusive)
  // Text axes: canonical spelling of a value, or InputError naming what is expected.
  std::function<std::string(const std::string&)> canonical;
  std::string_view doc;  // one line: what the axis is
};

// Every axis, in grid order (the first is the outermost loop). Hit rate is the innermost axis
// so that consecutive points share a shape and launch parameters (and their baseline session).
const std::vector<AxisDef>& axis_defs();
const AxisDef* find_axis_def(std::string_view name);
// Every axis with its default values, in grid order.
std::vector<Axis> default_axes();
// Names usable in constraints besides the numeric axes: G = q_heads / kv_heads.
const std::vector<std::string>& derived_names();

// Forced-hit lag distributions as written in specs: "fixed(8)", "uniform(1,64)",
// "normal(32,8)" (mean, sd). Lags are clipped to [1, min(K, m - r)] when drawn.
LagDistribution parse_lag(std::string_view text);
std::string lag_text(const LagDistribution& lag);

}  // namespace mactune::tuner
