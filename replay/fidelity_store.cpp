// Replay results into the database's fidelity table.
#include "replay/fidelity_store.h"

#include "mactune/build_info.h"

namespace mactune::replay {
namespace {

db::ErrorStats row_errors(const ErrorStats& e) {
  return {e.mean, e.p50, e.p99, e.max, e.frac_gt_0_1};
}

}  // namespace

db::FidelityResult fidelity_row(const DecodeTrace& trace, const ReplayPoint& pt, db::Id build_id) {
  db::FidelityResult r;
  r.trace_hash = trace.sha256();
  r.trace_name = trace.name();
  r.layer = pt.fidelity.layer;
  r.settings.mac = pt.settings.mac;
  r.settings.kv_dtype = pt.settings.kv_dtype;
  r.settings.engine = pt.settings.engine_label();
  r.steps = pt.fidelity.steps;
  r.hit_rate = pt.fidelity.hit_rate;
  r.group_all_hit_rate = pt.fidelity.group_all_hit_rate;
  r.skip_ratio = pt.fidelity.skip_ratio;
  r.head_skip_ratio = pt.fidelity.head_skip_ratio;
  r.rel_err = row_errors(pt.fidelity.rel_err);
  if (pt.fidelity.rel_err_vs_ref) r.rel_err_vs_ref = row_errors(*pt.fidelity.rel_err_vs_ref);
  r.build_id = build_id;
  return r;
}

FidelityRecorder::FidelityRecorder(const std::string& db_path) : store_(db::Store::open(db_path)) {
  db::BuildInfo b;
  b.git_revision = build::git_revision;
  b.compiler = build::compiler;
  b.version = build::version;
  b.build_type = build::build_type;
  build_id_ = store_.upsert_build(b);
}

void FidelityRecorder::record(const DecodeTrace& trace, const ReplayPoint& point) {
  store_.record_fidelity(fidelity_row(trace, point, build_id_));
  ++recorded_;
}

}  // namespace mactune::replay
