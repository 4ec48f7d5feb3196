// A tuner database with the shape of a shipped spec (configs/*.yaml) in milliseconds instead of
// minutes: every point of the spec's grid stored as `tune` stores it (the backend's instance
// names, the point's launch text and workload), with synthetic step times, and, when the spec
// searches the break-even, the probes the search would measure (tuner/search/search.h next_probes,
// over the decisions of what is stored so far) until the search stops.
//
// Synthetic times: full attention takes batch x context x q_heads ns scaled by its config; MAC
// runs 30% slower at hit rate 0 and gains with the hit rate, more at long contexts and less
// at large batches; at a forced skip ratio s it takes 1.15 - 0.6 s of full. Both sides have a
// 1% half-IQR, so the verdicts near the break-even are ties.
#pragma once

#include <string>
#include <vector>

#include "db/store.h"
#include "tuner/decide/emit.h"

namespace mactune::tuner::testing {

struct SpecFixture {
  Selection selection;
  std::vector<std::string> unreachable;  // as tune reports them (expand_grid)
  std::size_t points = 0, probes = 0;    // stored grid points and search probes
  double tie_tolerance = 0.01;           // the spec's decide section
  TieRule ties = TieRule::overlap;
};

// Fills `store` from the spec at `spec_path` (backend cpu).
SpecFixture fill_from_spec(db::Store& store, const std::string& spec_path);

// What `tune` decides at its end over such a database (tuner/decide/emit.h decide_and_store), with
// the spec's unreachable points.
Decided decide_fixture(db::Store& store, const SpecFixture& f);

}  // namespace mactune::tuner::testing
