// Break-even search: after the grid, per bucket and variant, bisect the hit rate between the
// highest rate at which the chosen MAC config is not clearly faster than full attention (lo)
// and the lowest from which it is (hi, the break-even that emit uses), measuring MAC and its
// baseline interleaved at each probe, until
//   - hi - lo <= the resolution (decide.resolution, default 0.02), or no forced quota lies
//     strictly between them (a step of B requests and H units per request can only hit k / (B H)
//     of its units: rates between two quotas are the same work), or
//   - a probe is too close to call (its intervals overlap): the two sides cannot be told apart
//     there, and the bracket (lo, hi] is where they tie.
// Probes are points like any other (a workload at one more hit rate): stored as they finish,
// skipped when already stored (a killed search resumes), merged with `db merge`. The search
// state is never stored: it is recomputed from the stored curve (tuner/decide.h), so the probes
// of a run, a resumed run or a merged database lead to the same next probe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tuner/decide.h"
#include "tuner/grid.h"

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
};

// The state of one variant's search from its curve (every stored hit rate of the chosen MAC
// config, grid and probes). `units`: forced units per step (batch x q_heads per head, batch x
// kv_heads per group); `grid_rates`: the spec's hit rates (a tie there is a reason to probe,
// not to stop). Probes are quotas k / units, the one nearest the bracket's middle.
SearchStatus search_status(const BreakEven& be, double resolution, int units,
                           const std::set<double>& grid_rates);

// The next probes of every open search: the grid point of each bucket's chosen MAC config and
// variant, at the probe's hit rate (its index kept: the same shard owns it).
std::vector<TunePoint> next_probes(const std::vector<BucketDecision>& decisions,
                                   const std::vector<TunePoint>& grid, double resolution);

// "search=tie bracket=(0.5,0.53125]" for a decision's notes and progress lines.
std::string search_text(const SearchStatus& s);

}  // namespace mactune::tuner
