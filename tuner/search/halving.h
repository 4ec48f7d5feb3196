// The rounds of `search: halving` (successive halving, Jamieson & Talwalkar 2016; Kernel
// Tuner and Hyperband use it to spend samples where they can still change the answer): every
// alive config of a bucket is measured briefly, interleaved; the better half is kept (and
// every config the measurement cannot tell from the best); the sample budget doubles; until
// one config or a tie set remains, which is then measured like an exhaustive sweep measures
// every config. These are the pure rules; tuner/search/sweep.cpp runs them.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace mactune::tuner {

// A config's standing after a round: its score and tie score as the decisions compute them
// (tuner/decide/decide.h: geometric mean over the bucket's conditions of its time over the best
// time there; the tie score counts differences inside the intervals as none).
struct HalvingScore {
  double score = 0, tie_score = 0;
};

struct HalvingStep {
  std::vector<std::size_t> keep;  // indices into the round's configs, in their order
  bool last = false;              // no further brief round: `keep` gets the final measurement
};

// After a round: keeps the ceil(n/2) best by score plus, with `honor_ties`, every config whose
// tie score is within `tie_tolerance` of the best tie score. Last when one config remains, when
// (honoring ties) every remaining one is tied with the best, or when nothing could be dropped.
// Ties are honored once the round's budget reaches the spec's min_samples: the interquartile
// ranges of 2 or 4 samples overlap for most configs and would stop the search at once.
HalvingStep halving_step(std::span<const HalvingScore> scores, double tie_tolerance,
                         bool honor_ties = true);

// Samples per case in brief round `round` (0-based): first, 2 first, 4 first, ..., never more
// than max_samples.
int halving_samples(int first, int round, int max_samples);

}  // namespace mactune::tuner
