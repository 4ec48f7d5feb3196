// Decisions from measurements: the best configuration per shape bucket (with a tie tolerance
// and a deterministic preference) and the break-even hit rate at which MAC pays off.
//
// Intervals: a measurement's interval is its interquartile range [q1, q3] over samples. MAC
// is "clearly faster" than full attention at a hit rate when MAC's q3 < the baseline's q1,
// "clearly slower" when MAC's q1 > the baseline's q3, and "too close to call" otherwise. The
// IQR is kept in the database, so every decision can be recomputed from stored rows alone
// (after a merge, on another machine) without the raw samples.
//
// Ties between configs: within the tie tolerance of the best score, or (TieRule::overlap, the
// default) not resolvable by the measurement: a config is scored as equal to the best at every
// condition where its IQR overlaps the best's, the way nvbench-compare-robust calls two
// states SAME. Among tied configs the incumbent wins, then the simpler one.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/break_even_status.h"
#include "kernels/instance.h"
#include "kernels/problem.h"
#include "kernels/time_stats.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/stats.h"

namespace mactune::tuner {

// A configuration of one side: its instance, launch parameters and (MAC) settings, typed.
struct Config {
  std::string instance;
  Launch launch;
  std::optional<MacParams> mac;  // none for the full baseline

  // instance|launch text|MAC settings text: the identity decisions compare configs by.
  std::string id() const;
  bool operator==(const Config&) const = default;
};

// The Config of one side of a grid point: the instance that runs it, the point's launch and
// (Family::mac) its MAC settings. The one place a point's settings become a Config: the
// search ranks and the decisions choose by what this returns. (Here and not beside TunePoint:
// Config is the decisions' type, and tuner/spec/ includes nothing above it.)
Config config_of(const TunePoint& p, const std::string& instance, Family family);

// One measured point: a MAC candidate and the full baseline measured interleaved with it.
struct PairRow {
  Bucket bucket;
  double hit_rate = 0;
  std::string variant;  // the rest of the workload: "lag=uniform(1,64),coherence=per-head"
  // A skip-ratio workload (kernels/forced.h ForcedQuota::skip_ratio): its target, and the
  // ratio the MAC side's step measured (its row's KV token counts). Such rows are no hit-rate
  // condition: they make the bucket's skip curve, not its break-even hit rate.
  std::optional<double> skip_ratio, measured_skip;
  // What each side ran, as the decisions compare and choose it: both with the point's launch,
  // the MAC side with its settings, the full side with none. Named `_config` (as
  // Choice::config) beside the times, which keep the short names every decision reads.
  Config mac_config, full_config;
  TimeStats mac, full;  // seconds per step
  // A side a search dropped after brief samples (db Measurement::partial): kept in the
  // database, skipped by the decisions (a partial MAC side is no candidate and no curve point;
  // a partial full side is no full candidate).
  bool mac_partial = false, full_partial = false;
  // The database rows of the two sides (db::Id; 0 for pairs not read from a database): what a
  // stored decision references for the config it chose.
  std::int64_t mac_row = 0, full_row = 0;
};

// A configuration chosen for a bucket, with the candidates it was preferred over.
struct Choice {
  Config config;
  double score = 0;      // full: median seconds; mac: geometric mean over conditions of t / t_best
  double tie_score = 0;  // the score with differences inside the intervals counted as none
  double margin = 0;     // first config outside the tie set: its score / this score - 1; 0 if none
  std::vector<Config> ties;        // configs within the tie tolerance, the chosen one first
  std::vector<double> tie_scores;  // their scores (as `score`), in the same order
  std::string reason;              // "fastest", "incumbent", "simpler", "only"

  bool empty() const { return config.instance.empty(); }
};

enum class Verdict { faster, slower, tie };
}  // namespace mactune::tuner
template <>
struct mactune::EnumNames<mactune::tuner::Verdict> {
  using S = tuner::Verdict;
  static constexpr std::string_view what = "verdict";
  static constexpr EnumName<S> names[] = {
      {S::faster, "faster"}, {S::slower, "slower"}, {S::tie, "tie"}};
};
namespace mactune::tuner {

// The interval rule every decision (and `mactune compare`) uses: `a` is faster than `b` when
// its interval lies wholly below b's (a.q3 < b.q1), slower when wholly above (a.q1 > b.q3),
// and a tie when the interquartile ranges overlap.
Verdict interval_verdict(const TimeStats& a, const TimeStats& b);

// MAC vs full at one hit rate, for the chosen MAC config.
struct CurvePoint {
  double hit_rate = 0;
  double speedup = 0;  // full median / MAC median, both from one run
  Verdict verdict = Verdict::tie;
};

// Where a break-even stands: one enum for the decisions, the database and every text of it.
using BreakEvenStatus = db::BreakEvenStatus;

// A bucket's break-even (or one variant's): the one type of it; the database's break_even row
// (db::BreakEvenRow) stores its status, hit rate and the speedup there, the bracket in notes.
struct BreakEven {
  BreakEvenStatus status = BreakEvenStatus::ambiguous;
  std::optional<double> hit_rate;  // status ok: the smallest hit rate from which MAC is
                                   // clearly faster at every measured hit rate above it
  // Status ok: the bracket's low end, the highest measured hit rate below hit_rate at which MAC
  // is not clearly faster (0 when none was measured below): the break-even lies in
  // (lo, hit_rate]; [hit_rate, hit_rate] when MAC wins at hit rate 0.
  std::optional<double> lo;
  // Whether the bracket includes lo: at lo the two sides could not be told apart (a tie, not
  // clearly slower), so MAC may already pay off there and the break-even lies in [lo, hit_rate].
  bool lo_closed = false;
  std::vector<CurvePoint> curve;  // sorted by hit rate
};

// MAC vs full at one forced skip ratio, for the chosen MAC config.
struct SkipPoint {
  double skip_ratio = 0;           // the target
  std::optional<double> measured;  // 1 - KV tokens read / total, from the MAC step
  double mac_median_s = 0, full_median_s = 0;
  double speedup = 0;
  Verdict verdict = Verdict::tie;
};

struct BucketDecision {
  Bucket bucket;
  Choice full;
  Choice mac;
  // Every candidate as scored (score, tie_score), in no particular order: `search: halving`
  // ranks its configs by these, so it drops configs by the decisions' own scores.
  std::vector<Choice> full_candidates, mac_candidates;
  std::map<std::string, BreakEven> by_variant;  // one per lag/coherence variant
  BreakEven break_even;  // the most conservative over variants (never > ambiguous > highest)
  // Skip-ratio workloads (sorted by target), and the lowest skip ratio from which MAC is
  // clearly faster at every measured ratio above it (break_even_of over the skip curve: its
  // `hit_rate` and `lo` are skip ratios here). Neither feeds emit or the search.
  std::vector<SkipPoint> skip_curve;
  BreakEven skip_break_even;
};

struct DecideOptions {
  double tie_tolerance = 0.01;
  TieRule ties = TieRule::overlap;
  // Incumbent config per (bucket key + "/full" or "/mac"): preferred within the tolerance.
  std::map<std::string, Config> incumbents;
};

// Break-even from the verdicts of one config at its hit rates (any order).
BreakEven break_even_of(std::vector<CurvePoint> curve);

// "(0.5, 0.625]", "[0.78125, 1]" (closed at a tie), "[0, 0]" (MAC faster from hit rate 0);
// empty when there is no break-even.
std::string bracket_text(const BreakEven& be);
// "0.9 (0.5, 0.9]", "1 [0.78125, 1]", "0" (from hit rate 0), or the status: the break-even and
// its bracket, as the report and `compare` print it.
std::string break_even_text(const BreakEven& be);

// The axes a bucket's break-even is read on: the hit rate where forced hit rates were measured,
// the KV skip ratio where forced skip ratios were (a bucket may have both, from two specs'
// runs), in that order; the hit rate alone when neither (a bucket of partial rows only: its
// break-even reads "ambiguous"). report.md's tables and tune's closing table both print a
// bucket's break-even on each of these, break_even_text() of break_even_on().
enum class BreakEvenAxis { hit_rate, skip_ratio };
std::vector<BreakEvenAxis> break_even_axes(const BucketDecision& d);
// The bucket's break-even on `axis`: d.break_even or d.skip_break_even.
const BreakEven& break_even_on(const BucketDecision& d, BreakEvenAxis axis);

// Decides every bucket that has measurements. Buckets come out sorted by Bucket order.
std::vector<BucketDecision> decide(const std::vector<PairRow>& rows, const DecideOptions& opt);

}  // namespace mactune::tuner
