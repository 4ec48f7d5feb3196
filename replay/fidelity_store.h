// Replay results in the database: one `fidelity` row per (trace hash, layer, settings), written
// as each point finishes, so an interrupted replay or calibration keeps what it measured.
#pragma once

#include <string>
#include <vector>

#include "db/store.h"
#include "replay/replay.h"

namespace mactune::replay {

// The row of one replayed point (trace identity by SHA-256 of the file).
db::FidelityResult fidelity_row(const DecodeTrace& trace, const ReplayPoint& point,
                                db::Id build_id = 0);

// Opens (or creates) the database and registers this build once; then stores points.
class FidelityRecorder {
 public:
  explicit FidelityRecorder(const std::string& db_path);
  void record(const DecodeTrace& trace, const ReplayPoint& point);
  int recorded() const { return recorded_; }
  const std::string& path() const { return store_.path(); }

 private:
  db::Store store_;
  db::Id build_id_ = 0;
  int recorded_ = 0;
};

}  // namespace mactune::replay
