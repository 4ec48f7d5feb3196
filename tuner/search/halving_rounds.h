// The rounds of `search: halving` over one bucket, apart from what measures (internal to
// tuner/: not installed). The live search (tuner/search/sweep_halving.cpp) samples built cases with
// measure_group; the replay (tuner/search/halving_replay.h) takes prefixes of the samples an
// exhaustive sweep stored. Both run these rounds, so a replay drops exactly the configs the live
// search would drop given the same samples.
//
// Brief rounds: every alive config at every condition (hit rate, lag, coherence), sampled
// interleaved with the other alive configs; the configs ranked by the decisions' own scores
// (decide() on the round's rows), the better half kept; baselines (full configs) halved the
// same way. Samples accumulate round by round. Then the survivors, and every baseline an alive
// MAC config pairs with, sampled on under the spec's stopping rule, as exhaustive samples
// every point.
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tuner/decide/decide.h"
#include "tuner/measure/measure.h"
#include "tuner/measure/progress.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

// One point of the bucket with the names of the instances its sides run.
struct HalvingPoint {
  const TunePoint* point = nullptr;
  std::string mac_instance, full_instance;
};

// One case a round samples: the MAC side of point `point`, or (mac = false) its baseline (the
// case every point of one condition with the same full key shares).
struct HalvingCase {
  std::size_t point = 0;
  bool mac = true;
};

// The samples of one condition's cases, as measure_group returns them, and the row notes.
struct SampledGroup {
  GroupResult result;
  std::string notes;
};

// What measures for the rounds.
class HalvingSampler {
 public:
  virtual ~HalvingSampler() = default;
  // Samples `cases` (one condition) interleaved under `policy` and `time_cap`, each case
  // continuing from its `prior` samples (one list per case). Throws Error when the cases
  // cannot be measured (they fail), Interrupted on a stop request.
  virtual SampledGroup sample(std::span<const HalvingCase> cases, const MeasurePolicy& policy,
                              double time_cap, std::span<const std::vector<double>> prior) = 0;
  // The MAC config of `point` was dropped: its case may be freed.
  virtual void dropped(std::size_t /*point*/) {}
};

// A side's last measurement.
struct HalvingSide {
  SideResult side;
  ClockState clock;
  std::string notes;
  int round = 0;
  bool final = false;  // measured in the final round (a complete row), else dropped (partial)
};

// One round: its budget and how many configs went in and came out.
struct HalvingRoundTrace {
  int samples = 0;  // per case; 0 in the final round (the spec's stopping rule)
  std::size_t mac_before = 0, mac_after = 0, full_before = 0, full_after = 0;
};

struct HalvingOutcome {
  std::map<std::size_t, HalvingSide> mac;                               // point -> MAC side
  std::map<std::pair<std::string, std::string>, HalvingSide> baseline;  // (full key, condition)
  std::map<std::size_t, std::string> failed;                            // point -> why
  std::vector<HalvingRoundTrace> rounds;

  // The baseline measurement point `i` pairs with, or null.
  const HalvingSide* full_of(std::span<const HalvingPoint> points, std::size_t i) const;
};

// Runs the rounds over the points of one bucket (indices into `points`); `failed` holds the
// points that cannot be measured (their cases could not be built), which take no part.
HalvingOutcome halving_rounds(const Spec& spec, std::span<const HalvingPoint> points,
                              std::map<std::size_t, std::string> failed, HalvingSampler& sampler,
                              Progress& progress);

// A decision row of a point from its two sides' summaries, as the rounds rank them.
PairRow halving_pair_row(const HalvingPoint& p, const TimeStats& mac, const TimeStats& full);

}  // namespace mactune::tuner
