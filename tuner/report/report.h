// `mactune report`: a decision set as markdown with SVG plots.
//
//   DIR/report.md                  the tables: per shape and context, the speedup of the chosen
//                                  MAC config over full attention at each batch and hit rate,
//                                  the break-even per bucket, the best configs, the smallest
//                                  context at which MAC wins; paragraphs wrapped at 100 columns
//                                  (tuner/report/report_text.h)
//   DIR/speedup_<shape>.svg        speedup vs batch, one panel per context, one line per hit
//                                  rate of the grid (the rates every bucket measured), the
//                                  break-even search's probes one series of small grey
//                                  markers, log scales, a dashed 1x line
//   DIR/breakeven_<shape>.svg      break-even hit rate vs context, one line per batch through
//                                  the bracket's high end (what emit uses) with the bracket
//                                  as a band, hollow markers at the top for "ambiguous" and
//                                  "never"; dashed, the cost model's predicted break-even
//                                  (tuner/decide/cost_model.h) between and beyond the contexts
//                                  measured
//   DIR/skip_<shape>.svg           a spec of skip ratios: speedup vs batch, one line per skip
//                                  ratio (tuner/report/report_skip.h)
// Every chart's text fits its canvas (tuner/report/svg.h). A bucket's break-even in report.md is
// the one tune's closing table prints (tuner/report/report_summary.h).
#pragma once

#include <string>
#include <vector>

#include "db/store.h"
#include "tuner/decide/emit.h"
#include "tuner/decide/model_io.h"
#include "tuner/report/svg.h"

namespace mactune::tuner {

// Writes the report into `dir` (created); returns the paths written.
std::vector<std::string> write_report(const db::Store& store, const Decided& d,
                                      const std::string& dir);

// The cost model's part of a report (no model: no predicted lines, no model section).
using ReportModel = FittedModel;

// The pieces, pure (tested).
std::string report_markdown(const Decided& d, const std::string& source,
                            const ReportModel& model = {});
svg::Chart speedup_chart(const std::vector<BucketDecision>& shape_decisions);
svg::Chart break_even_chart(const std::vector<BucketDecision>& shape_decisions,
                            const ReportModel& model = {});

}  // namespace mactune::tuner
