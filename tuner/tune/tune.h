// `mactune tune`: sweep a spec's grid on this device, store every point as it finishes,
// decide, emit the dispatch table and write the report.
//
// Crash safety: each point is stored in its own transactions as soon as it is measured (the
// baseline row, then the MAC row); nothing is held in memory that a kill would lose. A re-run
// of the same spec on the same database (same device and build) measures only the points that
// have no stored row; a point cut in half by a kill (baseline stored, MAC not) is measured
// again, and its stored baseline row is kept. Ctrl-C / SIGTERM stop between two samples, mark
// the run "interrupted" and leave every finished point stored.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tuner/decide/decide.h"
#include "tuner/measure/measure.h"
#include "tuner/measure/progress.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner {

struct TuneOptions {
  std::string spec_path;
  // Overrides of the spec's output section ("" = the spec's).
  std::string db_path, dispatch_path, header_path, report_dir;
  std::optional<BackendRequest> backend;     // none: the spec's device.backend
  std::optional<std::pair<int, int>> shard;  // {i, N}
  bool emit = true;                          // decide and write the dispatch table at the end
  bool report = true;                        // write the report when a report directory is known
  bool retry_failed = false;                 // measure again points stored as failed
  std::optional<SearchStrategy> search;      // none: the spec's search strategy
  std::string command;                       // the command line, stored with the run
  // A decorator over the backend the spec names (null: none): what a program that embeds the
  // tuner wraps around the device (its own timing, fault injection), and the seam the tests'
  // slowed-kernel double uses (tests/tuner/slow_backend.h). The CLI sets none.
  std::function<std::unique_ptr<MeasureBackend>(std::unique_ptr<MeasureBackend>)> wrap_backend{};
};

struct TuneResult {
  std::size_t points = 0;    // in this shard
  std::size_t measured = 0;  // measured by this run
  std::size_t stored = 0;    // already stored before it (resume)
  std::size_t failed = 0;    // recorded as failed by this run
  std::size_t probes = 0;  // break-even search probes measured by this run (tuner/search/search.h)
  std::vector<std::string> unreachable;  // grid points left out: skip ratio unreachable
  double seconds = 0;
  double measuring_seconds = 0;  // of `seconds`, sampling (warm-up included; setup excluded)
  std::string search;            // the strategy used
  std::string db_path, dispatch_path, report_dir;
  std::vector<BucketDecision> decisions;  // empty with emit = false or a partial shard
};

// Runs the sweep (a dry run is tuner/search/dry_run.h: it needs no device). `stop` (may be null) is
// polled between samples: when set, the run stops, is marked interrupted, and Interrupted is thrown
// after every finished point is stored.
TuneResult run_tune(const TuneOptions& options, Progress& progress,
                    const std::atomic<bool>* stop = nullptr);

}  // namespace mactune::tuner
