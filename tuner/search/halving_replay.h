// `mactune tune SPEC --search halving --replay EXHAUSTIVE.db`: the halving search replayed over
// the samples an exhaustive sweep stored, as Kernel Tuner's simulation mode replays a
// strategy over a cache of measured configs. Nothing runs: "measure config c to n samples"
// takes c's first n stored samples (in the order they were taken, interleaved with the other
// configs of their condition), through the same rounds as the live search
// (tuner/search/halving_rounds.h). So the strategy is compared with exhaustive on one set of
// samples, free of the drift between two runs on a shared machine; and a strategy can be studied on
// a GPU grid measured once, without the GPU.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tuner/decide/decide.h"
#include "tuner/search/dry_run.h"
#include "tuner/search/halving_rounds.h"

namespace mactune::tuner {

// How two picks of one bucket relate.
enum class PickAgreement {
  same,                // one config
  in_exhaustive_ties,  // halving's pick is in exhaustive's tie set
  in_halving_ties,     // exhaustive's pick is in halving's tie set
  differs,
};
}  // namespace mactune::tuner
template <>
struct mactune::EnumNames<mactune::tuner::PickAgreement> {
  using S = tuner::PickAgreement;
  static constexpr std::string_view what = "pick agreement";
  static constexpr EnumName<S> names[] = {{S::same, "same"},
                                          {S::in_exhaustive_ties, "in exhaustive's tie set"},
                                          {S::in_halving_ties, "in halving's tie set"},
                                          {S::differs, "differs"}};
};
namespace mactune::tuner {

PickAgreement agreement_of(const Choice& halving, const Choice& exhaustive);

// What a replayed strategy took of the stored samples.
struct HalvingReplayUse {
  // Sampling time, seconds: the samples taken plus the warm-up runs (each costed at its
  // case's median sample), by the live search's warm-up policy or the exhaustive sweep's.
  double seconds = 0;
  std::size_t samples = 0;
  // Cases whose stored samples ended before the strategy's rule was met (a live run would
  // have sampled on), and of brief rounds the samples missing (costed in `seconds`).
  std::size_t short_cases = 0, missing_samples = 0;

  HalvingReplayUse& operator+=(const HalvingReplayUse& o) {
    seconds += o.seconds;
    samples += o.samples;
    short_cases += o.short_cases;
    missing_samples += o.missing_samples;
    return *this;
  }
};

struct HalvingReplayBucket {
  std::string bucket;  // Bucket::key()
  // The picks: halving's from decide() over the rows the search would store (dropped configs
  // partial), exhaustive's from decide() over the rows the spec's exhaustive sweep stores (the
  // stored rows themselves when the database was measured by this spec).
  Choice halving_mac, exhaustive_mac, halving_full, exhaustive_full;
  PickAgreement mac = PickAgreement::differs, full = PickAgreement::differs;
  // What halving's MAC pick costs by exhaustive's rows: its score there over the best score,
  // minus 1 (0 when it is exhaustive's pick; its score is a geometric mean of time / best time).
  double mac_cost = 0;
  std::vector<HalvingRoundTrace> rounds;
  std::size_t configs = 0;       // MAC configs of the bucket
  std::size_t partial_rows = 0;  // rows the search would store partial
  HalvingReplayUse halving, exhaustive;
};

struct HalvingReplayResult {
  std::string db_path, device;  // the exhaustive database and the device its rows are from
  std::vector<HalvingReplayBucket> buckets;
  HalvingReplayUse halving, exhaustive;
  std::size_t mac_agree = 0, full_agree = 0;  // buckets whose picks are the same or tied
  // The rows the search would store, per bucket in grid order of the plan's points: the
  // halving pair of every point (what the equality test against a live run compares).
  std::vector<PairRow> halving_rows;
};

// Replays the plan's halving search over the exhaustive rows in `db_path` (read only). One line
// InputError when the file lacks the plan's points (or configs), or its rows hold no samples
// (stored before schema v5).
HalvingReplayResult replay_halving(const SweepPlan& plan, const std::string& db_path);

// The per-bucket table and the summary line (markdown).
std::string halving_replay_report(const HalvingReplayResult& r);

}  // namespace mactune::tuner
