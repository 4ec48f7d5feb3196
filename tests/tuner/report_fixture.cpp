#include "report_fixture.h"

#include <array>
#include <cmath>
#include <memory>

#include "kernels/forced.h"
#include "tuner/decide/store_io.h"
#include "tuner/measure/measure.h"
#include "tuner/search/search.h"
#include "tuner/spec/grid.h"
#include "tuner/spec/skip_ratio.h"
#include "tuner/spec/spec.h"

namespace mactune::tuner::testing {
namespace {

// 0..n-1 from a text, the same on every run (configs differ by a few percent).
unsigned spread(const std::string& text, unsigned n) {
  unsigned h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return h % n;
}

// Step seconds of one side of a point (see report_fixture.h).
double step_seconds(const TunePoint& p, bool mac) {
  const double launch = 1.0 + 0.03 * spread(p.launch_text(), 5);
  const double full = 1e-9 * p.shape.batch * p.context * p.shape.q_heads * launch;
  if (!mac) return full;
  const double settings =
      1.0 +
      0.02 * spread(std::to_string(p.mac.ring_capacity) + "/" + std::to_string(p.mac.band), 4);
  const double batch_octaves = std::log2(static_cast<double>(p.shape.batch));
  if (p.forced.quota == ForcedQuota::skip_ratio)
    return full * settings * (1.15 - 0.6 * p.forced.skip_ratio * (1.0 - 0.05 * batch_octaves));
  const double gain = (0.3 + 0.1 * std::log2(p.context / 1024.0)) / (1.0 + 0.15 * batch_octaves);
  return full * settings * (1.3 - gain * p.forced.hit_rate);
}

class Writer {
 public:
  Writer(db::Store& store, const Spec& spec) : store_(store), backend_(make_backend(Backend::cpu)) {
    sel_.device_id = store.upsert_device(backend_->device());
    sel_.build_id = store.upsert_build(current_build(*backend_));
    sel_.policy = name_of(backend_->timer());
    sel_.cold = spec.measure.mode == CacheMode::cold;
    run_ = store.begin_run(
        {.spec_text = spec.text, .device_id = sel_.device_id, .build_id = sel_.build_id});
  }
  ~Writer() { store_.finish_run(run_, db::RunStatus::finished); }
  const Selection& selection() const { return sel_; }

  void store(const TunePoint& p) {
    const auto [mac_name, full_name] = backend_->instance_names(p);
    const db::Id workload = store_.upsert_workload(to_db_workload(p));
    std::array<db::Measurement, 2> rows;
    for (bool mac : {false, true}) {
      const std::string& name = mac ? mac_name : full_name;
      InstanceDesc info =
          InstanceDesc::named(name, mactune::Backend::cpu, mac ? Family::mac : Family::full);
      for (const InstanceDesc& i : backend_->instances())
        if (i.name == name) info = i;
      db::Measurement& m = rows[mac ? 1 : 0];
      m.point = {sel_.device_id,  sel_.build_id, store_.upsert_instance(info),
                 p.launch_text(), workload,      sel_.policy,
                 sel_.cold};
      m.run_id = run_;
      const double t = step_seconds(p, mac);
      m.stats = {10, t, t * 0.99, t * 1.01, t * 0.98, t * 1.05, t, 0, 0.01};
      m.stop_reason = StopReason::noise;
      if (p.forced.quota == ForcedQuota::skip_ratio) {
        const long long total = 1LL * p.shape.batch * p.shape.kv_heads * (p.context + 1);
        const long long skipped = mac ? forced_skip_round(p.forced.skip_ratio, total) : 0;
        m.kv_tokens_read = total - skipped;
        m.kv_tokens_total = total;
      }
    }
    store_.record_measurements(rows);
  }

 private:
  db::Store& store_;
  std::unique_ptr<MeasureBackend> backend_;
  Selection sel_;
  db::Id run_ = 0;
};

DecideOptions decide_options(const SpecFixture& f) {
  DecideOptions o;
  o.tie_tolerance = f.tie_tolerance;
  o.ties = f.ties;
  return o;
}

}  // namespace

SpecFixture fill_from_spec(db::Store& store, const std::string& spec_path) {
  const Spec spec = load_spec(spec_path, Backend::cpu);
  // A scratch database: no fsync per measurement (the wide grid's 800 rows took seconds).
  store.connection().exec("PRAGMA synchronous = OFF");
  SpecFixture f;
  const std::vector<TunePoint> grid = expand_grid(spec, &f.unreachable);
  Writer w(store, spec);
  f.selection = w.selection();
  for (const TunePoint& p : grid) w.store(p);
  f.points = grid.size();
  f.tie_tolerance = spec.decide.tie_tolerance;
  f.ties = spec.decide.ties;
  // The search as tune runs it: rounds of one probe per open bucket, decided from what is
  // stored (each probe is a new hit rate, so every one is measured).
  for (int round = 0; spec.decide.search_break_even() && round < 16; ++round) {
    const auto decisions = decide_only(store, f.selection, decide_options(f)).decisions;
    const std::vector<TunePoint> probes = next_probes(decisions, grid, spec.decide.resolution);
    if (probes.empty()) break;
    for (const TunePoint& p : probes) w.store(p);
    f.probes += probes.size();
  }
  return f;
}

Decided decide_fixture(db::Store& store, const SpecFixture& f) {
  Decided d = decide_and_store(store, f.selection, decide_options(f));
  d.unreachable = f.unreachable;
  return d;
}

}  // namespace mactune::tuner::testing
