// The tuner's side of the database (db/store.h): points to workload rows and point keys,
// stored measurements back to pairs for the decisions, decisions to best-config and
// break-even rows.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"
#include "tuner/decide/decide.h"
#include "tuner/measure/measure.h"
#include "tuner/spec/grid.h"

namespace mactune::tuner {

// This binary's build row (git revision, compiler, digest of the instance names it holds).
db::BuildInfo current_build(const MeasureBackend& backend);
// The same from the backend's instance list (a backend whose device is not on this machine).
db::BuildInfo current_build(const std::vector<InstanceDesc>& instances);

db::Workload to_db_workload(const TunePoint& p);
Bucket bucket_of(const db::Workload& w);
// "lag=uniform(1,64),coherence=per-head": the workload fields besides the bucket, the MAC
// settings and the hit rate.
std::string variant_of(const db::Workload& w);
// A decision row's params text: the launch text, then ';' and the MAC settings text (MAC).
std::string config_text(const Config& c);

// The rows of one decision set: one device, one build, one measurement policy.
struct Selection {
  db::Id device_id = 0;
  db::Id build_id = 0;
  std::string policy;  // the timer: "steady_clock", "cuda_events", "cupti"
  bool cold = true;
};

// Picks what `mactune emit` / `report` decide over when not told: the device of this machine
// if the database has it, else its only device; the build and policy of the most recent ok
// measurement on that device. InputError when the database has no (usable) measurements or
// several devices and none is this machine's. `device` may be "auto", a fingerprint digest or
// a glob over device names.
Selection select_rows(const db::Store& store, const std::string& device,
                      const DeviceFingerprint& here);

// Every complete pair (an ok MAC row and its ok full row: same workload, params, policy) of
// the selection. Half pairs and failed points are counted in `incomplete` / `failed`.
struct LoadedPairs {
  std::vector<PairRow> pairs;
  std::size_t incomplete = 0, failed = 0, split_runs = 0;
};
LoadedPairs load_pairs(const db::Store& store, const Selection& sel);

// The incumbents for decide(): the stored best configs of the selection's device and policy.
std::map<std::string, Config> load_incumbents(const db::Store& store, const Selection& sel);

// Writes one best_configs row per bucket and family ("full", "mac") and one break_even row
// per bucket, each referencing a measured row of the config it chose (from `loaded`, the pairs
// the decisions were drawn from). The params texts spell the config for reading by hand: a
// MAC config's are its launch params, ';', then its MAC settings.
void store_decisions(db::Store& store, const Selection& sel, const LoadedPairs& loaded,
                     const std::vector<BucketDecision>& decisions, double tie_tolerance);

}  // namespace mactune::tuner
