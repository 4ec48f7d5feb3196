// A head's decision at step m from its reduced ring scan (DESIGN.md section 1): eligibility,
// the pick rule, the forced-hit override and the first position it attends; then, with
// group_hits, its group's demotion (DESIGN.md section 8). Runs on the
// device in the planner (one thread a head, off the scan kernel, which then needs no double
// math and no stack), and on the host in tests/cuda against the reference's decisions.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/config.h"
#include "kernels/cuda/params.h"
#include "kernels/forced.h"
#include "kernels/problem.h"
#include "kernels/stats.h"

namespace mactune::cuda::detail {

// The ring entry of position pos holds it, with a non-empty summary.
MACTUNE_HD inline bool ring_entry_valid(const RingBuffers& ring, int q_heads, int slot, int h,
                                        int pos) {
  const int sl = pos % ring.capacity;
  return ring.pos[static_cast<long long>(slot) * ring.capacity + sl] == pos &&
         ring.lse[(static_cast<long long>(slot) * q_heads + h) * ring.capacity + sl] >
             -__builtin_huge_valf();
}

MACTUNE_HD inline HeadDecision decide_head(const PlanParams& p, int row, int h) {
  const StepRow r = p.rows[row];
  HeadDecision d;
  if (r.m < p.min_context) return d;  // not eligible: a miss that still writes its ring entry
  d.eligible = true;
  const MatchPartial best = p.match_best[static_cast<long long>(row) * p.q_heads + h];
  // Some candidate is under the threshold: its exact minimum (the probe evaluated it fully).
  const bool under = best.pos >= 0 && best.d2 < p.threshold;
  d.d2 =
      under ? best.d2 : (best.bound < best.d2 ? best.bound : best.d2);  // +inf without candidates
  const bool newest = p.pick == PickRule::newest;
  d.hit = newest ? best.newest >= 0 : under;
  d.p = d.hit ? (newest ? best.newest : best.pos) : -1;
  if (p.forced.enabled) {     // the same decisions as the reference and the CPU engine
    long long kv_before = 0;  // the skip-ratio quota's share of this row (O(n), one head)
    if (p.forced.quota == ForcedQuota::skip_ratio)
      for (int b = 0; b < row; ++b) kv_before += p.rows[b].m + 1;
    const ForcedSite at{row, p.n, h, p.q_heads, p.kv_heads, r.m, kv_before};
    const ForcedChoice c = forced_choice(p.forced, p.header->step, at, p.ring.capacity, p.band);
    const int pos = r.m - c.lag;
    d.hit = c.hit && ring_entry_valid(p.ring, p.q_heads, r.slot, h, pos);
    d.p = d.hit ? pos : -1;
  }
  d.start = d.hit ? cache_end(d.p, p.band) : 0;
  return d;
}

// group_hits over the decisions of one (request, KV head) group, d [group]: the rule of
// kernels/stats.h (group_keeps_hits, demote_to_miss), as ref::Session::demote_partial_groups.
MACTUNE_HD inline void demote_partial_group(HeadDecision* d, int group) {
  if (group_keeps_hits({d, static_cast<std::size_t>(group)})) return;
  for (int j = 0; j < group; ++j)
    if (d[j].hit) demote_to_miss(d[j]);
}

}  // namespace mactune::cuda::detail
