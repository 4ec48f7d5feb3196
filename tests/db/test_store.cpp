// The store's API: upserts by natural key, point identity, record/resume rules, queries,
// decisions and fidelity round trips.
#include <gtest/gtest.h>

#include "tests/db/fixtures.h"

namespace mactune::db {
namespace {

using testing::add_keys;
using testing::Keys;
using testing::ok_point;
using testing::TempDir;
using testing::test_build;
using testing::test_device;
using testing::test_instance;
using testing::test_stats;
using testing::test_workload;

TEST(Store_Open, CreatesLatestSchemaWithWalAndForeignKeys) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  EXPECT_EQ(s.schema_version(), latest_version(builtin_migrations()));
  EXPECT_EQ(s.connection().prepare("PRAGMA journal_mode").step(), true);
  auto jm = s.connection().prepare("PRAGMA journal_mode");
  ASSERT_TRUE(jm.step());
  EXPECT_EQ(jm.text(0), "wal");
  EXPECT_EQ(s.connection().scalar_int("PRAGMA foreign_keys"), 1);
  EXPECT_EQ(s.connection().scalar_int("PRAGMA synchronous"), 2);  // FULL
  for (const auto& t : table_names()) EXPECT_TRUE(s.connection().table_exists(t)) << t;
  for (const auto& [t, n] : s.table_counts()) EXPECT_EQ(n, 0) << t;
}

TEST(Store_Upsert, SameNaturalKeySameIdAcrossReopen) {
  TempDir dir;
  Keys first;
  {
    Store s = Store::open(dir.file("a.db"));
    first = add_keys(s);
    const Keys again = add_keys(s);
    EXPECT_EQ(first.device, again.device);
    EXPECT_EQ(first.build, again.build);
    EXPECT_EQ(first.mac, again.mac);
    EXPECT_EQ(first.w0, again.w0);
    EXPECT_NE(first.w0, first.w1);  // hit rate 0.9 vs 0.95 are two workloads
    EXPECT_NE(first.mac, first.full);
    // Another thread count is another device; another revision another build.
    EXPECT_NE(s.upsert_device(test_device(1)), first.device);
    EXPECT_NE(s.upsert_build(test_build("fff000")), first.build);
  }
  Store s = Store::open(dir.file("a.db"));
  const Keys reopened = add_keys(s);
  EXPECT_EQ(reopened.device, first.device);
  EXPECT_EQ(reopened.w1, first.w1);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM devices"), 2);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM workloads"), 2);
  ASSERT_EQ(s.devices().size(), 2u);
  EXPECT_EQ(s.devices()[0].fingerprint.key(), test_device().key());
  EXPECT_EQ(s.find_device(test_device()), first.device);
}

TEST(Store_Upsert, InstanceNameWithAnotherConfigIsRefused) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  InstanceDesc i = test_instance("mac");
  s.upsert_instance(i);
  i.config += ",extra=1";
  EXPECT_THROW(s.upsert_instance(i), Error);
}

TEST(Store_Upsert, WorkloadKeyCoversEveryField) {
  const Workload base = test_workload(4, 32768, 0.9);
  std::vector<Workload> variants(12, base);
  variants[0].problem.batch = 8;
  variants[1].context = 65536;
  variants[2].problem.kv_heads = 4;
  variants[3].problem.kv_dtype = DType::f16;
  variants[4].problem.page_size = 32;
  variants[5].forced.hit_rate = 0.5;
  variants[6].forced.lag = {LagKind::fixed, 1024, 1024};
  variants[7].forced.coherence = Coherence::per_group;
  variants[8].mac.ring_capacity = 256;
  variants[9].mac.band = 64;
  variants[10].mac.tau = 0.6;
  variants[11].extra = "seed=7";
  for (const auto& v : variants) EXPECT_NE(v.key(), base.key()) << v.key();
}

TEST(Store_Measurement, FirstResultKeptOkReplacesFailure) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  const Measurement a = ok_point(k, k.mac, k.w0, 1e-3);
  EXPECT_FALSE(s.has_measurement(a.point));
  EXPECT_EQ(s.record_measurement(a), RecordOutcome::inserted);
  EXPECT_TRUE(s.has_measurement(a.point));
  EXPECT_EQ(s.record_measurement(ok_point(k, k.mac, k.w0, 2e-3)), RecordOutcome::kept_existing);
  auto rows = s.measurements({.device_id = k.device});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].m.stats.median_s, 1e-3);

  Measurement f = ok_point(k, k.full, k.w0, 0);
  f.status = PointStatus::failed;
  f.error = "can_implement: head_dim 128 not compiled";
  EXPECT_EQ(s.record_measurement(f), RecordOutcome::inserted);
  EXPECT_EQ(s.point_status(f.point), PointStatus::failed);
  EXPECT_EQ(s.measurements({.device_id = k.device}).size(), 1u);  // ok_only by default
  EXPECT_EQ(s.measurements({.device_id = k.device, .ok_only = false}).size(), 2u);
  EXPECT_EQ(s.record_measurement(f), RecordOutcome::kept_existing);
  EXPECT_EQ(s.record_measurement(ok_point(k, k.full, k.w0, 3e-3)), RecordOutcome::replaced_failure);
  EXPECT_EQ(s.point_status(f.point), PointStatus::ok);
  EXPECT_EQ(s.record_measurement(f), RecordOutcome::kept_existing);  // never downgraded
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 2);
}

// A row a search left partial (brief samples of a dropped config) is kept and read back as
// partial; another partial result keeps it, a complete one replaces it, and nothing replaces a
// complete row with a partial one.
TEST(Store_Measurement, CompleteResultReplacesPartial) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  Measurement p = ok_point(k, k.mac, k.w0, 1e-3);
  p.partial = true;
  p.stats.samples = 2;
  EXPECT_EQ(s.record_measurement(p), RecordOutcome::inserted);
  EXPECT_TRUE(s.point_partial(p.point));
  auto rows = s.measurements({.device_id = k.device});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].m.partial);
  Measurement p2 = p;
  p2.stats = test_stats(5e-3);
  p2.partial = true;
  EXPECT_EQ(s.record_measurement(p2), RecordOutcome::kept_existing);
  const Measurement full = ok_point(k, k.mac, k.w0, 2e-3);
  EXPECT_EQ(s.record_measurement(full), RecordOutcome::replaced_partial);
  EXPECT_FALSE(s.point_partial(p.point));
  rows = s.measurements({.device_id = k.device});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].m.partial);
  EXPECT_EQ(rows[0].m.stats.median_s, 2e-3);
  EXPECT_EQ(s.record_measurement(p), RecordOutcome::kept_existing);
  EXPECT_FALSE(s.point_partial(p.point));
}

TEST(Store_Measurement, EveryPointKeyFieldIsIdentity) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  const Measurement a = ok_point(k, k.mac, k.w0, 1e-3);
  s.record_measurement(a);
  const Id other_device = s.upsert_device(test_device(1));
  const Id other_build = s.upsert_build(test_build("fff000"));
  std::vector<PointKey> variants(7, a.point);
  variants[0].device_id = other_device;
  variants[1].build_id = other_build;
  variants[2].instance_id = k.full;
  variants[3].params = "chunk_tokens=512,threads=2";
  variants[4].workload_id = k.w1;
  variants[5].policy = "cpu-wall-hot-loop";
  variants[6].cold = false;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    EXPECT_FALSE(s.has_measurement(variants[i])) << "variant " << i;
    Measurement m = a;
    m.point = variants[i];
    EXPECT_EQ(s.record_measurement(m), RecordOutcome::inserted) << "variant " << i;
  }
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 8);
}

TEST(Store_Measurement, QueryReturnsKeysAndStatsExactly) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  Measurement a = ok_point(k, k.mac, k.w0, 1.25e-3);
  s.record_measurement(a);
  s.record_measurement(ok_point(k, k.full, k.w0, 2.5e-3));
  s.record_measurement(ok_point(k, k.mac, k.w1, 1.0e-3));

  auto mac_w0 = s.measurements({.device_id = k.device, .workload_id = k.w0, .family = Family::mac});
  ASSERT_EQ(mac_w0.size(), 1u);
  const MeasurementRow& r = mac_w0[0];
  EXPECT_EQ(r.instance.name, test_instance("mac").name);
  EXPECT_EQ(r.instance.config, test_instance("mac").config);
  EXPECT_EQ(r.workload.key(), test_workload(4, 32768, 0.9).key());
  EXPECT_EQ(r.m.point.params, a.point.params);
  EXPECT_EQ(r.m.point.policy, a.point.policy);
  EXPECT_TRUE(r.m.point.cold);
  EXPECT_EQ(r.m.stats.median_s, a.stats.median_s);
  EXPECT_EQ(r.m.stats.q1_s, a.stats.q1_s);
  EXPECT_EQ(r.m.stats.q3_s, a.stats.q3_s);
  EXPECT_EQ(r.m.stats.min_s, a.stats.min_s);
  EXPECT_EQ(r.m.stats.max_s, a.stats.max_s);
  EXPECT_EQ(r.m.stats.mean_s, a.stats.mean_s);
  EXPECT_EQ(r.m.stats.samples, a.stats.samples);
  EXPECT_EQ(r.m.stop_reason, StopReason::noise);
  EXPECT_EQ(r.m.modeled_bytes, 1.5e9);
  EXPECT_EQ(r.m.clock_mhz, 3000.0);
  EXPECT_EQ(r.m.notes, a.notes);

  EXPECT_EQ(s.measurements({.device_id = k.device, .workload_id = k.w0}).size(), 2u);
  EXPECT_EQ(s.measurements({.device_id = k.device, .family = Family::mac}).size(), 2u);
  EXPECT_EQ(s.measurements({.device_id = k.device, .instance = test_instance("full").name}).size(),
            1u);
  EXPECT_EQ(s.measurements({.device_id = k.device, .cold = false}).size(), 0u);
  EXPECT_EQ(s.measurements({.device_id = k.device + 100}).size(), 0u);
}

TEST(Store_Measurement, PairIsStoredAllOrNothing) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  Measurement pair[2] = {ok_point(k, k.mac, k.w0, 1e-3), ok_point(k, k.full, k.w0, 2e-3)};
  pair[1].point.instance_id = 9999;  // no such instance: the second insert fails
  EXPECT_THROW(s.record_measurements(pair), Error);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 0);
  pair[1].point.instance_id = k.full;
  pair[1].stats.q3_s = 0;  // inconsistent: refused before anything is written
  EXPECT_THROW(s.record_measurements(pair), Error);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 0);
  pair[1] = ok_point(k, k.full, k.w0, 2e-3);
  const auto outcomes = s.record_measurements(pair);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0], RecordOutcome::inserted);
  EXPECT_EQ(outcomes[1], RecordOutcome::inserted);
  EXPECT_EQ(s.record_measurements(pair)[1], RecordOutcome::kept_existing);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 2);
}

TEST(Store_Measurement, InconsistentStatsAreRefusedAndNothingIsStored) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  Measurement a = ok_point(k, k.mac, k.w0, 1e-3);
  a.stats.q1_s = 2e-3;  // above the median
  EXPECT_THROW(s.record_measurement(a), Error);
  a = ok_point(k, k.mac, k.w0, 1e-3);
  a.stats.samples = 0;
  EXPECT_THROW(s.record_measurement(a), Error);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 0);
}

TEST(Store_Run, BeginGivesUniqueKeysFinishStampsStatus) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  RunInfo r{.spec_text = "families: [mac]\n",
            .shard_index = 1,
            .shard_count = 4,
            .device_id = k.device,
            .build_id = k.build};
  const Id a = s.begin_run(r);
  const Id b = s.begin_run(r);
  EXPECT_NE(a, b);
  s.finish_run(a, RunStatus::finished);
  auto q = s.connection().prepare(
      "SELECT status, finished_at IS NOT NULL, spec_hash, shard_index, shard_count"
      " FROM runs WHERE id = ?1");
  q.bind(1, a);
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.text(0), "finished");
  EXPECT_EQ(q.int64(1), 1);
  EXPECT_EQ(q.text(2), fnv1a_hex("families: [mac]\n"));
  EXPECT_EQ(q.int64(3), 1);
  EXPECT_EQ(q.int64(4), 4);
  r.shard_index = 4;
  EXPECT_THROW(s.begin_run(r), InputError);
  EXPECT_THROW(s.finish_run(9999, RunStatus::failed), Error);
}

TEST(Store_Decisions, BestConfigRoundTripAndRewrite) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  BestConfig b;
  b.device_id = k.device;
  b.build_id = k.build;
  b.bucket = Bucket::of(test_workload(4, 32768, 0.9).problem, 32768);
  b.hit_rate = 0.9;
  b.family = Family::mac;
  b.policy = "cpu-wall";
  b.instance = test_instance("mac").name;
  b.params = "chunk=256,threads=2";
  b.median_s = 1e-3;
  b.margin = 0.004;
  b.tie_set = {{b.instance, b.params, 1e-3},
               {b.instance, "chunk=\"512\",threads=2", 1.004e-3, 7}};  // 0: no row known
  s.write_best_config(b);
  auto got = s.best_configs(k.device);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].bucket.key(), b.bucket.key());
  EXPECT_EQ(got[0].hit_rate, 0.9);
  EXPECT_EQ(got[0].instance, b.instance);
  EXPECT_EQ(got[0].margin, 0.004);
  ASSERT_EQ(got[0].tie_set.size(), 2u);
  EXPECT_EQ(got[0].tie_set[1].params, "chunk=\"512\",threads=2");
  EXPECT_EQ(got[0].tie_set[1].median_s, 1.004e-3);
  EXPECT_EQ(got[0].tie_set[0].measurement_id, 0);
  EXPECT_EQ(got[0].tie_set[1].measurement_id, 7);

  b.params = "chunk=512,threads=2";  // the tuner decided again
  b.tie_set.clear();
  b.margin.reset();
  s.write_best_config(b);
  got = s.best_configs(k.device);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].params, "chunk=512,threads=2");
  EXPECT_TRUE(got[0].tie_set.empty());
  EXPECT_FALSE(got[0].margin.has_value());

  b.hit_rate = 0.95;  // another bucket
  s.write_best_config(b);
  EXPECT_EQ(s.best_configs(k.device).size(), 2u);
  b.instance = "not_an_instance";
  EXPECT_THROW(s.write_best_config(b), Error);
}

TEST(Store_Decisions, BreakEvenFoundAmbiguousNever) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  BreakEvenRow b;
  b.device_id = k.device;
  b.bucket = Bucket::of(test_workload(1, 32768, 0).problem, 32768);
  b.policy = "cpu-wall";
  b.status = BreakEvenStatus::ok;
  b.hit_rate = 0.5;
  b.speedup = 1.3;
  b.mac_instance = test_instance("mac").name;
  b.full_instance = test_instance("full").name;
  s.write_break_even(b);
  b.bucket.context = 65536;
  b.status = BreakEvenStatus::ambiguous;
  b.hit_rate.reset();
  b.speedup.reset();
  s.write_break_even(b);
  b.bucket.context = 131072;
  b.status = BreakEvenStatus::never;
  b.mac_instance.clear();
  s.write_break_even(b);
  b.status = BreakEvenStatus::ok;  // found without a hit rate
  EXPECT_THROW(s.write_break_even(b), Error);

  const auto got = s.break_evens(k.device);
  ASSERT_EQ(got.size(), 3u);
  std::map<long long, BreakEvenRow> by_ctx;
  for (const auto& g : got) by_ctx[g.bucket.context] = g;
  EXPECT_EQ(by_ctx[32768].status, BreakEvenStatus::ok);
  EXPECT_EQ(by_ctx[32768].hit_rate, 0.5);
  EXPECT_EQ(by_ctx[32768].speedup, 1.3);
  EXPECT_EQ(by_ctx[32768].mac_instance, test_instance("mac").name);
  EXPECT_EQ(by_ctx[65536].status, BreakEvenStatus::ambiguous);
  EXPECT_FALSE(by_ctx[65536].hit_rate.has_value());
  EXPECT_EQ(by_ctx[131072].status, BreakEvenStatus::never);
  EXPECT_EQ(by_ctx[131072].mac_instance, "");
}

TEST(Store_Fidelity, RoundTripKeyedByTraceLayerSettings) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  FidelityResult r;
  r.trace_hash = "9f86d081884c7d65";
  r.trace_name = "code_1k";
  r.layer = 3;
  r.settings.mac.tau = 0.6;
  r.settings.mac.band = 64;
  r.steps = 1024;
  r.hit_rate = 0.41;
  r.group_all_hit_rate = 0.2;
  r.skip_ratio = 0.37;
  r.head_skip_ratio = 0.39;
  r.rel_err = {1e-3, 5e-4, 0.08, 1.3, 0.004};
  s.record_fidelity(r);
  r.layer = 4;
  r.rel_err_vs_ref = ErrorStats{2e-3, 1e-3, 0.09, 1.4, 0.005};
  s.record_fidelity(r);
  r.hit_rate = 0.42;  // same key: replaced
  s.record_fidelity(r);
  r.settings.mac.tau = 0.45;  // other settings: a new row
  s.record_fidelity(r);

  const auto got = s.fidelity(r.trace_hash);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(s.fidelity("other").size(), 0u);
  EXPECT_EQ(got[0].layer, 3);
  EXPECT_FALSE(got[0].rel_err_vs_ref.has_value());
  EXPECT_EQ(got[0].rel_err.p99, 0.08);
  int layer4_tau06 = 0;
  for (const auto& g : got)
    if (g.layer == 4 && g.settings.mac.tau == 0.6) {
      ++layer4_tau06;
      EXPECT_EQ(g.hit_rate, 0.42);
      ASSERT_TRUE(g.rel_err_vs_ref.has_value());
      EXPECT_EQ(g.rel_err_vs_ref->max, 1.4);
      EXPECT_EQ(g.settings.mac.band, 64);
      EXPECT_EQ(g.settings.key(),
                r.settings.key().replace(r.settings.key().find("tau=0.45"), 8, "tau=0.6"));
    }
  EXPECT_EQ(layer4_tau06, 1);
}

}  // namespace
}  // namespace mactune::db
