// `tune`'s closing table, which `mactune report` and `mactune emit` print too: markdown, one row
// per bucket with the chosen MAC and full configs, MAC's speedup at each hit rate or skip ratio
// measured, and the bucket's break-even on each axis it was measured on, as report.md gives it
// (both print break_even_text(break_even_on(d, axis)) over break_even_axes(d):
// tuner/decide/decide.h).
#pragma once

#include <string>
#include <vector>

#include "tuner/decide/decide.h"

namespace mactune::tuner {

// The header names the axis: "speedup by hit rate | break-even hit rate" (a hit-rate spec),
// "speedup by skip ratio | break-even skip ratio" (a skip-ratio spec), both when the buckets
// have both (skip-ratio points then read "s0.9:1.52x✓" and their break-even "skip 0.8 ...").
std::string summary_table(const std::vector<BucketDecision>& decisions);

}  // namespace mactune::tuner
