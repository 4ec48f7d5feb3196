// The skip-ratio workload axis (the paper's Figure 6): forced hits whose groups and lags are
// solved so that each step skips exactly round(s x sum of kv_len) KV tokens (kernels/forced.h,
// ForcedQuota::skip_ratio). Here: what a spec may say about it, which points cannot reach their
// ratio exactly (and what would let them), and the measured ratio a stored row carries.
#pragma once

#include <string>

#include "tuner/spec/grid.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

// A spec that sweeps `workload.skip_ratio`: its points use the skip-ratio quota. Refuses, as a
// one-line InputError at the key's line, a spec that also sets hit_rate or lag (the quota
// solves hits and lags) or a per-head coherence (hit groups hit with all their heads); then
// pins hit_rate to one value (0, unused) and coherence to per-group. No-op without the key.
void resolve_skip_ratio_axis(Spec& spec);

// Whether the spec's points use the skip-ratio quota (after resolve_skip_ratio_axis).
bool sweeps_skip_ratio(const Spec& spec);

// "" when every request of the point's step skips exactly its share of the point's ratio;
// else why not, naming the smallest ring capacity K (or the largest band r) that would reach
// it: "skip_ratio 0.5 at batch 1, context 16384: each hit group would read 3277 tokens, more
// than r + K = 2112; reachable with K >= 3213". Always "" for hit-rate points.
std::string skip_unreachable(const TunePoint& p);

// "hit=0.5" or "skip=0.8": the quota of a point in progress lines.
std::string quota_label(const ForcedHits& f);

// "skip_ratio 0.5 at <bucket> (K 2048, r 64): <why>": one line of tune's and the report's list.
std::string unreachable_line(const TunePoint& p, const std::string& why);

}  // namespace mactune::tuner
