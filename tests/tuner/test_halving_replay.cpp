// The replay against the live search on a deterministic backend: the CPU backend with its cases
// replaced by ones whose k-th sample is a fixed function of the config and k. An exhaustive
// sweep and a live halving sweep (tuner/search/sweep.h, the code `mactune tune` runs) both measure
// with it; the replay over the exhaustive database must then store the very rows the live
// halving search stored (which configs were dropped, after how many samples, their summaries)
// and make the same picks.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "cli_util.h"
#include "db/store.h"
#include "tuner/decide/store_io.h"
#include "tuner/search/dry_run.h"
#include "tuner/search/halving_replay.h"
#include "tuner/search/sweep.h"

namespace mactune::tuner {
namespace {

using testing::TempDir;
using testing::tiny_spec;

// MAC: each config its own speed (one a trap: slow for its first 2 samples, the fastest
// after), with a wobble of a few percent in k; baselines: one constant time per config.
double sample_time(const TunePoint& p, bool mac, int k) {
  const double chunk = p.cpu.chunk_tokens;
  const double rows = p.cpu.block_rows;
  if (!mac) return 100e-6 * (1 + 0.01 * std::log2(chunk) + 0.003 * rows);
  double base = 50e-6 * (1 + 0.1 * std::abs(std::log2(chunk / 128)) + 0.02 * rows / 8);
  if (chunk == 64 && rows == 16) base = k < 2 ? 200e-6 : 40e-6;
  return base * (1 + 0.04 * std::sin(1.3 * k + chunk + rows + 2 * p.forced.hit_rate));
}

class FakeCase final : public Case {
 public:
  FakeCase(std::string instance, const TunePoint& p, bool mac)
      : instance_(std::move(instance)), point_(p), mac_(mac) {}
  std::string instance() const override { return instance_; }
  void run() override {}
  double sample() override { return sample_time(point_, mac_, k_++); }
  StepStats stats() const override { return {}; }

 private:
  std::string instance_;
  TunePoint point_;
  bool mac_;
  int k_ = 0;
};

// The CPU backend (names, device, memory) with fake cases.
class FakeBackend final : public MeasureBackend {
 public:
  Backend kind() const override { return cpu_->kind(); }
  DeviceFingerprint device() const override { return cpu_->device(); }
  Timer timer() const override { return cpu_->timer(); }
  void use_timer(std::optional<Timer> t) override { cpu_->use_timer(t); }
  std::vector<InstanceDesc> instances() const override { return cpu_->instances(); }
  std::pair<std::string, std::string> instance_names(const TunePoint& p) const override {
    return cpu_->instance_names(p);
  }
  std::string can_run(const TunePoint& p) const override { return cpu_->can_run(p); }
  double memory_available() const override { return 0; }
  double case_bytes(const TunePoint&, bool) const override { return 0; }
  std::unique_ptr<Case> make_case(const TunePoint& p, bool mac, std::uint64_t) override {
    const auto names = cpu_->instance_names(p);
    return std::make_unique<FakeCase>(mac ? names.first : names.second, p, mac);
  }
  void flush_caches() override {}
  ClockState clock_begin() override { return {}; }
  ClockState clock_end() override { return {}; }

 private:
  std::unique_ptr<MeasureBackend> cpu_ = make_cpu_backend();
};

// Sweeps every point of the plan with `strategy` into a new database at `path`.
void sweep_into(const SweepPlan& plan, SearchStrategy strategy, const std::string& path) {
  FakeBackend backend;
  Spec spec = plan.spec;
  spec.search.strategy = strategy;
  db::Store store = db::Store::open(path);
  const db::Id device = store.upsert_device(backend.device());
  const db::Id build = store.upsert_build(current_build(backend));
  std::vector<PendingPoint> pending;
  for (std::size_t i = 0; i < plan.points.size(); ++i) {
    const TunePoint& p = plan.points[i];
    const db::Id w = store.upsert_workload(to_db_workload(p));
    PendingPoint pp{&p, {}, {}};
    pp.mac = {device,
              build,
              store.upsert_instance(
                  InstanceDesc::named(plan.names[i].first, mactune::Backend::cpu, Family::mac)),
              p.launch_text(),
              w,
              std::string(name_of(backend.timer())),
              plan.cold};
    pp.full = pp.mac;
    pp.full.instance_id = store.upsert_instance(
        InstanceDesc::named(plan.names[i].second, mactune::Backend::cpu, Family::full));
    pending.push_back(pp);
  }
  Progress silent = Progress::silent();
  const SweepCounts c = sweep(backend, store, spec, 0, pending, silent, nullptr);
  ASSERT_EQ(c.failed, 0u);
  ASSERT_EQ(c.measured, plan.points.size());
}

std::string row_key(const PairRow& r) {
  return r.bucket.key() + "|" + r.mac_config.instance + "|" + launch_text(r.mac_config.launch) +
         "|" + std::to_string(r.hit_rate);
}

TEST(Replay, EqualsTheLiveHalvingSearchOnADeterministicBackend) {
  TempDir dir;
  // 2 buckets x 2 hit rates x 8 configs (chunk_tokens x block_rows); a noise target the
  // wobble misses, so the final round stops by the stopping rule (stable noise), not at a
  // fixed count. min_samples is the last brief round's budget (2, 4, 8, 16): every stored row
  // holds the samples the search asks for, so the replay is whole (no case runs short).
  std::string spec =
      tiny_spec("d", "[1, 2]", "[512]", "[0, 1]", "[32, 64, 128, 256]", 10, "bucket");
  const auto replace = [&](const std::string& a, const std::string& b) {
    const auto at = spec.find(a);
    ASSERT_NE(at, std::string::npos) << a;
    spec.replace(at, a.size(), b);
  };
  replace("threads: 1}", "threads: 1, block_rows: [8, 16]}");
  replace("min_samples: 10, max_samples: 10, noise: 0.5",
          "min_samples: 16, max_samples: 24, noise: 0.02, stable_window: 4");
  dir.write("d.yaml", spec + "search: {strategy: halving, first_samples: 2}\n");
  const SweepPlan plan = plan_sweep(dir.file("d.yaml"), Backend::cpu);
  ASSERT_EQ(plan.points.size(), 32u);
  sweep_into(plan, SearchStrategy::exhaustive, dir.file("ex.db"));
  sweep_into(plan, SearchStrategy::halving, dir.file("hv.db"));

  const HalvingReplayResult replay = replay_halving(plan, dir.file("ex.db"));
  const db::Store live = db::Store::open(dir.file("hv.db"), {.mode = db::OpenMode::read_only});
  const LoadedPairs loaded = load_pairs(live, select_rows(live, "auto", FakeBackend().device()));
  ASSERT_EQ(loaded.pairs.size(), 32u);
  ASSERT_EQ(replay.halving_rows.size(), 32u);
  std::map<std::string, const PairRow*> live_rows;
  for (const PairRow& r : loaded.pairs) live_rows[row_key(r)] = &r;
  std::size_t partial = 0;
  for (const PairRow& r : replay.halving_rows) {
    const auto it = live_rows.find(row_key(r));
    ASSERT_NE(it, live_rows.end()) << row_key(r);
    const PairRow& l = *it->second;
    EXPECT_EQ(r.mac_partial, l.mac_partial) << row_key(r);
    EXPECT_EQ(r.full_partial, l.full_partial) << row_key(r);
    EXPECT_EQ(r.mac.samples, l.mac.samples) << row_key(r);
    EXPECT_EQ(r.full.samples, l.full.samples) << row_key(r);
    EXPECT_DOUBLE_EQ(r.mac.median_s, l.mac.median_s) << row_key(r);
    EXPECT_DOUBLE_EQ(r.full.median_s, l.full.median_s) << row_key(r);
    partial += r.mac_partial;
  }
  EXPECT_GT(partial, 8u) << "the search dropped too little to test anything";
  EXPECT_EQ(replay.halving.short_cases, 0u);
  EXPECT_EQ(replay.exhaustive.short_cases, 0u);

  // The same picks as decide() over the live search's rows; the trap config is not one of
  // them though it is exhaustive's pick (its samples after the first two are the fastest).
  DecideOptions opt;
  opt.tie_tolerance = plan.spec.decide.tie_tolerance;
  const std::vector<BucketDecision> d = decide(loaded.pairs, opt);
  ASSERT_EQ(d.size(), 2u);
  ASSERT_EQ(replay.buckets.size(), 2u);
  for (std::size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(replay.buckets[b].halving_mac.config.id(), d[b].mac.config.id());
    EXPECT_EQ(replay.buckets[b].halving_full.config.id(), d[b].full.config.id());
    EXPECT_EQ(launch_text(replay.buckets[b].exhaustive_mac.config.launch),
              "threads=1,chunk_tokens=64,block_rows=16,match_mode=scan");
    EXPECT_NE(replay.buckets[b].halving_mac.config.id(),
              replay.buckets[b].exhaustive_mac.config.id());
    EXPECT_LT(replay.buckets[b].halving.seconds, replay.buckets[b].exhaustive.seconds);
  }
}

}  // namespace
}  // namespace mactune::tuner
