// The skip-ratio part of `mactune report` (tuner/report.h): per shape, the speedup of the
// chosen MAC config at each forced skip ratio (the paper's Figure 6) as a chart and a table
// whose rows show the measured skip ratio next to the target, and the points tune left out
// because their skip ratio was unreachable.
#pragma once

#include <string>
#include <vector>

#include "tuner/decide.h"
#include "tuner/svg.h"

namespace mactune::tuner {

// Whether any bucket of the list has skip-ratio points.
bool has_skip_curve(const std::vector<BucketDecision>& shape_decisions);

// skip_<shape>.svg: speedup vs batch, one panel per context, one line per skip ratio, log
// scales, a dashed 1x line.
svg::Chart skip_speedup_chart(const std::vector<BucketDecision>& shape_decisions);

// The "Speedup at forced skip ratios" section of one shape (markdown, "" without skip points).
std::string skip_markdown(const std::vector<BucketDecision>& shape_decisions,
                          const std::string& shape);

// The "Unreachable skip ratios" section ("" when none).
std::string unreachable_markdown(const std::vector<std::string>& unreachable);

}  // namespace mactune::tuner
