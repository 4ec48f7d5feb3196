// `mactune compare BASE.db NEW.db`: the kernel engineer's "did my change make it faster, slower
// or nothing, and where?" over two tuning databases (nvbench-compare-robust's job, for
// mactune's own store).
//
// Points are matched by what they measure, not by which build or run measured them: the
// instance's canonical name, the launch params, the workload key (shape, context, hit rate,
// lag, coherence, MAC settings) and the measurement policy (timer, cold or hot caches). Where a
// database holds the same point from several builds or runs (a re-tune after a code change),
// the most recently finished ok row is the one compared (a complete row before a partial one:
// the brief samples of a config `search: halving` dropped; such points are marked partial).
//
// Each matched point is classified by the interval rule of the decisions (interval_verdict in
// tuner/decide/decide.h, on the stored interquartile ranges):
//   SAME       the medians differ by at most `threshold` (relative), whatever the intervals;
//   FASTER     more than that, and NEW's interval lies wholly below BASE's;
//   SLOWER     more than that, and NEW's interval lies wholly above BASE's;
//   AMBIGUOUS  more than that, but the intervals overlap: the noise cannot tell.
//
// Two databases of different devices (fingerprints) cannot compare times. Then each point is
// its MAC/full pair, measured interleaved on its own device, and what is compared is the MAC
// time over the full baseline's time (lower is better): its median is mac.median_s/full.median_s
// and its interval the widest the two IQRs allow, [mac.q1_s/full.q3_s, mac.q3_s/full.q1_s]. Pairs
// are matched by workload, launch params and cache mode (the instances and timers differ by
// device).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "db/store.h"
#include "kernels/device.h"
#include "kernels/time_stats.h"
#include "tuner/decide/decide.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/stats.h"

namespace mactune::tuner {

enum class Change { same, faster, slower, ambiguous };
std::string_view change_name(Change c);  // "SAME", "FASTER", "SLOWER", "AMBIGUOUS"

// NEW against BASE for a lower-is-better quantity (a time, or a MAC/full ratio).
Change classify_change(const TimeStats& base, const TimeStats& next, double threshold);

// MAC time over full time of one interleaved pair, as an interval (see above).
TimeStats mac_over_full(const TimeStats& mac, const TimeStats& full);

struct CompareOptions {
  double threshold = 0.05;   // relative median change below which a point is SAME
  double resolution = 0.02;  // break-evens this close agree (decide.resolution's default)
  // Which device of each database: "auto" (its only device with measurements), a fingerprint
  // digest or a glob over device names.
  std::string base_device = "auto", new_device = "auto";
};

// One point found in both databases.
struct ComparedPoint {
  Bucket bucket;
  std::string instance;  // canonical name; across devices "BASE name -> NEW name" if they differ
  std::string params;    // launch params
  double hit_rate = 0;
  std::string mac;       // "K=512,r=256" (MAC rows; empty for the full baseline)
  std::string variant;   // "lag=...,coherence=...": shown when a bucket holds several
  std::string policy;    // "steady_clock/cold"
  TimeStats base, next;  // seconds, or MAC/full ratios across devices
  double ratio = 0;      // next.median_s / base.median_s
  Change change = Change::same;
  bool partial = false;  // a side is a partial row (brief samples of a config a search dropped)
};

// A point only one database has (or one that failed there).
struct OneSidedPoint {
  Bucket bucket;
  std::string instance, params, mac, variant, policy;
  double hit_rate = 0;
  std::string failed;  // the stored error when the point failed on this side (it is listed
                       // even if the other side has it), empty otherwise
};

// One bucket's break-even in both databases, each decided afresh from its own rows (decide()
// with its default options, as `mactune emit` does). They agree when both are found and lie
// within the resolution of each other or one inside the other's bracket (tuner/decide/decide.h:
// closed at lo where the sides tie there), or when neither is found and the status is the
// same: the reproducibility check of two runs of one spec, and what changed across builds.
struct ComparedBreakEven {
  Bucket bucket;
  BreakEven base, next;
  bool agree = false;
};
bool break_evens_agree(const BreakEven& a, const BreakEven& b, double resolution);

struct CompareSide {
  std::string path;
  DeviceFingerprint device;
  std::string device_digest;
  std::size_t rows = 0;        // measurement rows read (ok and failed) on this device
  std::size_t superseded = 0;  // older rows of a point measured again (a later build or run)
  std::size_t builds = 0, runs = 0;
};

struct Comparison {
  CompareSide base, next;
  bool cross_device = false;  // compared MAC/full ratios, not times
  double threshold = 0.05;
  std::vector<ComparedPoint> points;  // by bucket, then instance, params, hit rate
  std::vector<OneSidedPoint> only_base, only_new;
  double resolution = 0.02;
  std::vector<ComparedBreakEven> break_evens;  // buckets both databases decide, in order

  std::size_t count(Change c) const;
  bool any_slower() const { return count(Change::slower) > 0; }
};

// Throws InputError (naming the file) when a database has no measurements, or several devices
// and the option does not pick one.
Comparison compare_stores(const db::Store& base, const db::Store& next, const CompareOptions& o);

// "compare: 24 points: 20 SAME, 0 FASTER, 4 SLOWER, 0 AMBIGUOUS; 1 only in BASE, 0 only in NEW"
std::string compare_summary(const Comparison& c);
// "break-even: 6 buckets in both, 5 agree (within 0.02 or inside the other's bracket)"; empty
// when no bucket has a break-even on both sides.
std::string break_even_summary(const Comparison& c);
// The report: devices, rule, one table per bucket with ratios, the one-sided points, the
// break-evens side by side, summary.
std::string compare_markdown(const Comparison& c);

}  // namespace mactune::tuner
