// The measuring loop of `mactune tune`: the points left to measure, in interleave groups, each
// group's cases built, sampled interleaved and every point recorded as soon as its group
// finishes (the baseline row, then the MAC row, each in its own transaction).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "db/store.h"
#include "tuner/measure/measure.h"
#include "tuner/measure/progress.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

// A point to measure with its database keys.
struct PendingPoint {
  const TunePoint* point = nullptr;
  db::PointKey mac, full;
};

// Groups of pending points measured together. Interleave::point: one point per group.
// Interleave::bucket: the points of one bucket at one hit rate, lag and coherence (every
// launch config and MAC setting), in grid order of their first point.
std::vector<std::vector<std::size_t>> interleave_groups(const std::vector<PendingPoint>& pending,
                                                        Interleave mode);

struct SweepCounts {
  std::size_t measured = 0, failed = 0;
  double measuring_seconds = 0;  // wall time spent sampling (warm-up included), setup excluded
};

// Measures every pending point and records it. Throws Interrupted (after recording every
// finished point) when `stop` is set.
SweepCounts sweep(MeasureBackend& backend, db::Store& store, const Spec& spec, db::Id run_id,
                  const std::vector<PendingPoint>& pending, Progress& progress,
                  const std::atomic<bool>* stop);

// "b=4 ctx=16384 hit=0.9 K=512 r=256 threads=0,chunk_tokens=256,block_rows=16"
std::string point_label(const TunePoint& p);

}  // namespace mactune::tuner
