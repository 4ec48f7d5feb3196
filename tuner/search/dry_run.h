// Planning a sweep without measuring anything: the points of a spec, what a database already
// holds of them, and how long the rest will take, per shard. `mactune tune --dry-run` and
// `mactune slurm` are built on it.
//
// It works where the spec's device is absent: on a cluster's login node, which has no GPU, a
// spec for an H200 still expands to its points, the "auto" instances resolve through this
// build's registry (the choice depends on the shape, not on the GPU), and stored rows are read
// for the database's devices that match the spec (backend and device.name), since this
// machine's fingerprint says nothing about the nodes that will measure.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "db/store.h"
#include "kernels/device.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

struct SweepPlan {
  Spec spec;
  Backend backend = Backend::cpu;  // the backend the points run on
  // This machine's device when it is one the spec is for (the backend is usable here and
  // device.name matches it); empty otherwise, and `not_here` says why.
  std::optional<DeviceFingerprint> here;
  std::string not_here;
  db::BuildInfo build;  // this binary's build row for the backend
  std::string policy;   // the timer: the policy part of every point key
  bool cold = true;
  std::vector<TunePoint> points;         // the whole grid, in grid order
  std::vector<std::string> unreachable;  // left out of it: skip ratio unreachable (why)
  std::vector<std::pair<std::string, std::string>> names;  // {MAC, full} instance per point
};

// Reads the spec and expands its grid. `backend` overrides device.backend (none: the spec's);
// a cuda spec plans without a GPU. InputError for a bad spec, as `mactune tune` reports it.
SweepPlan plan_sweep(const std::string& spec_path,
                     std::optional<BackendRequest> backend = std::nullopt);

enum class Stored { no, ok, failed };

struct StoredPoints {
  std::vector<Stored> state;  // per point of the plan
  std::string device;         // whose rows count ("3f2a... NVIDIA H200"), "" when none
  std::string note;           // why nothing counts, or a caveat about the device chosen
};

// What the database at `db_path` holds of the plan's points, for this build and the spec's
// device: this machine's device when the database has it, else the matching device measured
// most recently. A missing file holds nothing (and is not created); the file is only read.
StoredPoints stored_points(const SweepPlan& plan, const std::string& db_path);

// Seconds each point of the plan is expected to take, from earlier runs (any build) on the
// spec's device in the given databases: the time of that very point when it was measured,
// else the mean over its bucket (same shape, batch and context: the same cost), else the
// median over every timed point. A point's time is its interleave group's wall time (cases
// built, warm-up, samples) divided among the group's points.
struct PointTimes {
  std::vector<std::optional<double>> seconds;  // per point; all empty without timed rows
  std::vector<char> source;                    // 'p' point, 'b' bucket, 'm' median, 0 none
  std::size_t rows = 0;                        // timed rows found
  std::vector<std::string> databases;          // where they came from
};
PointTimes point_times(const SweepPlan& plan, const std::vector<std::string>& db_paths);

// One shard's work: points whose grid index is `shard` mod `count`.
struct ShardEstimate {
  int shard = 0, count = 1;
  std::size_t points = 0, stored = 0, to_measure = 0;
  // Bound from the time caps: every point left stops at its cap (sessions built, warm-up and
  // flushes included); a point stopped by its noise target takes less.
  double cap_bound_s = 0;
  std::optional<double> expected_s;  // from point_times, when it has timed rows
  std::size_t timed_by_point = 0, timed_by_bucket = 0, timed_by_median = 0;
};
// `retry_failed`: points stored as failed are measured again (mactune tune --retry-failed).
ShardEstimate estimate_shard(const SweepPlan& plan, const std::vector<Stored>& state,
                             const PointTimes& times, int shard, int count, bool retry_failed);

// "<= 13m30s by the time caps (81 points x 10 s); about 9m12s from earlier runs (60 points
// timed as themselves, 21 by their bucket)".
std::string describe_time(const ShardEstimate& e, const SweepPlan& plan);

}  // namespace mactune::tuner
