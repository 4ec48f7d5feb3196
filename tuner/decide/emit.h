// Emit: the decisions over a database's measurements, stored back, and the dispatch table
// (dispatcher/table.h) a serving engine loads.
//
// Buckets become table entries piecewise: per shape, each measured batch value covers the
// batches from itself up to the next measured value (the smallest one also covers everything
// below it, the largest everything above), and likewise for contexts; with a fitted cost
// model both boundaries move to where the model's decision changes (make_table). MAC is chosen at
// expected hit rates >= the bucket's break-even; a bucket whose break-even is "ambiguous" or
// "never" keeps MAC's config in the table but no min_hit_rate, so the engine runs full
// attention there: a tuned table never loses to the baseline on the tuner's own evidence.
#pragma once

#include <string>
#include <vector>

#include "db/store.h"
#include "dispatcher/table.h"
#include "tuner/decide/decide.h"
#include "tuner/decide/model_io.h"
#include "tuner/decide/store_io.h"

namespace mactune::tuner {

struct Decided {
  Selection selection;
  DeviceFingerprint device;
  LoadedPairs loaded;
  std::vector<BucketDecision> decisions;
  // Points the spec's grid left out because their skip ratio is unreachable (tune fills it from
  // expand_grid; `mactune report` on a database alone has no spec, so none).
  std::vector<std::string> unreachable;
};

// Decides every bucket of the selection (opt.incumbents: filled from the stored best configs;
// opt.tie_tolerance and opt.ties as given), without
// writing anything (a read-only database). InputError when there is nothing to decide.
Decided decide_only(const db::Store& store, const Selection& sel, DecideOptions opt);
// The same over pairs already loaded from the selection (which may be none).
Decided decide_loaded(const db::Store& store, const Selection& sel, LoadedPairs loaded,
                      DecideOptions opt);
// The same, and writes the decisions back (best_configs, break_even).
Decided decide_and_store(db::Store& store, const Selection& sel, const DecideOptions& opt);

// The dispatch table of a decision set. With a fitted model (tuner/decide/model_io.h), the context
// boundary between two measured contexts of one shape and batch whose break-evens differ goes
// where the model's predicted break-even comes nearer the upper bucket's than the lower's
// (bisected on the context to 1/64 of it), not at the upper measured context; where the model
// disagrees with both measurements, or either bucket has no break-even, it stays there. Batch
// boundaries likewise, bisected on the batch, one per shape and pair of measured batches (the
// entries of a batch row share its interval): the median over the contexts at which the two
// batches' break-evens differ of where the model places it.
dispatch::DispatchTable make_table(const Decided& d, const std::string& source_database,
                                   const FittedModel& model = {});

// Writes the table (JSON, atomically) and, when `header` is not empty, its C++ header; then
// reads the JSON back through the dispatch loader with this machine's checks when the table
// is for this machine. Returns "" or the loader's refusal (a bug: the caller reports it).
std::string write_dispatch(const dispatch::DispatchTable& table, const std::string& json_path,
                           const std::string& header_path, const DeviceFingerprint& here);

}  // namespace mactune::tuner
