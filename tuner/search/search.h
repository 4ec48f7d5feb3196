// Break-even search: after the grid, per bucket and variant, bisect the hit rate between the
// highest rate at which the chosen MAC config is not clearly faster than full attention (lo)
// and the lowest from which it is (hi, the break-even that emit uses), measuring MAC and its
// baseline interleaved at each probe, until
//   - hi - lo <= the resolution (decide.resolution, default 0.02), or no rate between them
//     does other work: a step of B requests and H units each can only hit k / (B H) of them,
//     and with G heads a group a query head's hit saves KV reads only once its whole group
//     hits, so the KV a step reads changes at a few quotas only (batch 1, 32 heads per head:
//     at 0.625 and 0.75 among the quotas above 0.5 of the quick spec). Between two rates of equal
//     work the break-even cannot lie; a probe there would measure noise; or
//   - a probe is too close to call (its intervals overlap): the two sides cannot be told apart
//     there, and the bracket (lo, hi] is where they tie.
// Probes are points like any other (a workload at one more hit rate): stored as they finish,
// skipped when already stored (a killed search resumes), merged with `db merge`. The search
// state is never stored: it is recomputed from the stored curve (tuner/decide/decide.h), so the
// probes of a run, a resumed run or a merged database lead to the same next probe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tuner/decide/decide.h"
#include "tuner/spec/grid.h"

namespace mactune::tuner {

enum class SearchStop {
  open,        // probe `next`
  resolution,  // the bracket is within the resolution (or the quota's step)
  tie,         // the last probe could not tell the sides apart
  no_bracket,  // nothing to bisect: MAC is never clearly faster, or faster everywhere measured
};
std::string_view search_stop_name(SearchStop s);

struct SearchStatus {
  SearchStop stop = SearchStop::no_bracket;
  std::optional<double> next;  // the hit rate to probe (stop == open)
  double lo = 0, hi = 0;       // the bracket (lo, hi] (stop != no_bracket)
  bool lo_closed = false;      // [lo, hi]: the sides tie at lo (BreakEven::lo_closed)
};

// The state of one variant's search from its curve (every stored hit rate of the chosen MAC
// config, grid and probes). `units`: forced units per step (batch x q_heads per head, batch x
// kv_heads per group); `grid_rates`: the spec's hit rates (a tie there is a reason to probe,
// not to stop); `work_changes`: the quotas k at which the step reads other KV than at k - 1
// (null: every quota). Probes are quotas k / units among them, the middle one of those
// strictly inside the bracket. When lo and hi are the same work the measurements contradict
// each other: the sides cannot be told apart (stop: tie).
SearchStatus search_status(const BreakEven& be, double resolution, int units,
                           const std::set<double>& grid_rates,
                           const std::vector<int>* work_changes = nullptr);

// The quotas 1..units at which the KV the step of `p` reads changes (tuner/decide/cost_model.h
// features of the step at each quota; monotone: a larger quota's hits include a smaller one's).
std::vector<int> work_changes(const TunePoint& p, int units);

// The next probes of every open search: the grid point of each bucket's chosen MAC config and
// variant, at the probe's hit rate (its index kept: the same shard owns it; the chosen full
// config's probe takes the same index, so both sides are measured together).
std::vector<TunePoint> next_probes(const std::vector<BucketDecision>& decisions,
                                   const std::vector<TunePoint>& grid, double resolution);

// "search=tie bracket=(0.5,0.53125]" for a decision's notes and progress lines.
std::string search_text(const SearchStatus& s);

}  // namespace mactune::tuner
