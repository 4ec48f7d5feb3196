#include "tuner/report/report_summary.h"

#include <sstream>

#include "tuner/report/report_text.h"
#include "tuner/spec/expr.h"

namespace mactune::tuner {

std::string summary_table(const std::vector<BucketDecision>& ds) {
  bool hit = false, skip = false;
  for (const auto& d : ds)
    for (BreakEvenAxis a : break_even_axes(d)) (a == BreakEvenAxis::hit_rate ? hit : skip) = true;
  const bool both = hit && skip;
  const std::string axis = both ? "hit rate (s: skip ratio)" : skip ? "skip ratio" : "hit rate";
  std::ostringstream o;
  o << "| bucket | MAC config | full config | speedup by " << axis << " | break-even " << axis
    << " |\n|---|---|---|---|---|\n";
  for (const auto& d : ds) {
    o << "| " << d.bucket.key() << " | " << launch_text(d.mac.config.launch);
    if (d.mac.config.mac)
      o << " K=" << d.mac.config.mac->ring_capacity << " r=" << d.mac.config.mac->band;
    o << " | " << launch_text(d.full.config.launch) << " |";
    for (const auto& p : d.break_even.curve)
      o << ' ' << format_number(p.hit_rate) << ':' << speedup_text(p.speedup)
        << verdict_mark(p.verdict);
    for (const auto& p : d.skip_curve)
      o << (both ? " s" : " ") << format_number(p.skip_ratio) << ':' << speedup_text(p.speedup)
        << verdict_mark(p.verdict);
    o << " |";
    const auto axes = break_even_axes(d);
    for (std::size_t i = 0; i < axes.size(); ++i)
      o << (i ? "; " : " ") << (both && axes[i] == BreakEvenAxis::skip_ratio ? "skip " : "")
        << break_even_text(break_even_on(d, axes[i]));
    o << " |\n";
  }
  return o.str();
}

}  // namespace mactune::tuner
