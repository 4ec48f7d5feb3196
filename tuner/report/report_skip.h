// The skip-ratio part of `mactune report` (tuner/report/report.h): per shape, the speedup of the
// chosen MAC config at each forced skip ratio (the paper's Figure 6) as a chart and a table
// whose rows show the measured skip ratio next to the target, and the points tune left out
// because their skip ratio was unreachable.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tuner/decide/decide.h"
#include "tuner/report/svg.h"

namespace mactune::tuner {

// The levels (hit rates or skip ratios) of a speedup-vs-batch chart: `lines` one line each,
// labelled `label` + the level; `markers` (the break-even search's probes: rates each bucket
// measured on its own) together one series of small grey markers without a line, labelled
// `markers_label`.
struct SpeedupLevels {
  std::vector<double> lines;
  std::string label;
  std::vector<double> markers{};
  std::string markers_label{};
};

// MAC's speedup against batch, one panel per context, log scales, a dashed 1x line, the
// levels' lines and markers; `speedup(d, level)` is the bucket's speedup there, nullopt where
// it was not measured. Titled `what` + ": " + the shape of the first decision. The hit-rate
// chart (report.cpp) and the skip-ratio chart are both this.
svg::Chart speedup_vs_batch(
    const std::string& what, const std::vector<const BucketDecision*>& decisions,
    const SpeedupLevels& levels,
    const std::function<std::optional<double>(const BucketDecision&, double)>& speedup);

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
