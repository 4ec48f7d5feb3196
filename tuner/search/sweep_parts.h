// Internal to tuner/search/sweep.cpp and tuner/search/sweep_halving.cpp (not installed): the pieces
// the exhaustive sweep and the halving search share.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "db/store.h"
#include "tuner/measure/measure.h"
#include "tuner/measure/progress.h"
#include "tuner/search/sweep.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner::sweep_parts {

std::string ms(double seconds);  // "0.123 ms"
// The seed of a point's synthetic data: one per bucket (every config of a shape, both sides
// of a point, run over the same KV cache and queries).
std::uint64_t point_seed(const Spec& spec, const TunePoint& p);
// The baseline case of a point: one per shape, launch config and full instance.
std::string full_key(const MeasureBackend& backend, const TunePoint& p);
std::string full_key(const TunePoint& p, const std::string& full_instance);
// The points measured interleaved in bucket mode: one bucket at one forced-hit workload.
std::string group_key(const TunePoint& p);
// A measurement row of a point, started at `started`, finished now.
db::Measurement row(const db::PointKey& key, db::Id run_id, const std::string& started);
// "timer=...; clock: ...; interleaved=N; disturbed=D (discarded X); wall_s=S"
std::string group_notes(const MeasureBackend& backend, const GroupResult& r, std::size_t cases);

// What the halving search uses of the sweep that runs it.
struct SweepContext {
  MeasureBackend& backend;
  db::Store& store;
  const Spec& spec;
  db::Id run_id = 0;
  Progress& progress;
  const std::atomic<bool>* stop = nullptr;
  SweepCounts& counts;
  // Records a point that cannot run (or whose case could not be built) as failed.
  std::function<void(const PendingPoint&, const std::string& started, const std::string& why)> fail;
  // Whether the cases of these points (and their baselines) fit in memory together.
  std::function<bool(const std::vector<PendingPoint>&, const std::vector<std::size_t>&)>
      fits_in_memory;
  // Measures points exhaustively, as one interleave group; frees the sweep's cached cases.
  std::function<void(const std::vector<PendingPoint>&, std::vector<std::size_t>)> exhaustive;
  std::function<void()> release_cases;
};

// `search: halving` over the points of one bucket (docs/spec.md `search`).
void halving_bucket(SweepContext& ctx, const std::vector<PendingPoint>& pending,
                    const std::vector<std::size_t>& members);

}  // namespace mactune::tuner::sweep_parts
