// The store across schema versions: files written before a migration open with their rows
// intact (v3 -> partial, v4 -> samples, v5 -> the export view), and the samples column
// (v5) round trip.
#include <gtest/gtest.h>

#include "tests/db/fixtures.h"

namespace mactune::db {
namespace {

using testing::add_keys;
using testing::Keys;
using testing::migrations_up_to;
using testing::ok_point;
using testing::TempDir;

// One ok MAC row (5 samples of 1 ms) written with the columns every schema version has, as a
// build of an older version would have written it (its store cannot: the API writes today's).
Measurement insert_old_row(Store& old) {
  const Keys k = add_keys(old);
  const Measurement m = ok_point(k, k.mac, k.w0, 1e-3);
  old.connection().exec(
      "INSERT INTO measurements (device_id, build_id, instance_id, params, workload_id, policy,"
      " cold, status, median_s, q1_s, q3_s, min_s, max_s, mean_s, samples, started_at,"
      " finished_at) VALUES (" +
      std::to_string(m.point.device_id) + ", " + std::to_string(m.point.build_id) + ", " +
      std::to_string(m.point.instance_id) + ", '" + m.point.params + "', " +
      std::to_string(m.point.workload_id) + ", '" + m.point.policy +
      "', 1, 'ok', 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 5, 'x', 'y')");
  return m;
}

// A database written before the partial flag (schema v3) migrates: its rows are complete.
TEST(Store_Measurement, OlderDatabaseMigratesWithCompleteRows) {
  TempDir dir;
  const std::vector<Migration> v3 = migrations_up_to(3);
  Measurement m;
  {
    Store old = Store::open(dir.file("a.db"), {.migrations = &v3});
    EXPECT_EQ(old.schema_version(), 3);
    m = insert_old_row(old);
  }
  Store s = Store::open(dir.file("a.db"));
  EXPECT_EQ(s.schema_version(), latest_version(builtin_migrations()));
  EXPECT_TRUE(s.has_measurement(m.point));
  EXPECT_FALSE(s.point_partial(m.point));
  const auto rows = s.measurements({.device_id = m.point.device_id});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].m.partial);
}

// Every kept sample is stored in the order taken (schema v5) and read back exactly; a row
// stored without them (a failed row, or one from before v5) reads back none.
TEST(Store_Measurement, SamplesRoundTripInOrder) {
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const Keys k = add_keys(s);
  Measurement a = ok_point(k, k.mac, k.w0, 1e-3);
  a.samples = {1.25e-3, 0.1 + 0.2, 9.999999e-4, 1e-3, 1.0000000000000002e-3};
  a.stats.samples = 5;
  s.record_measurement(a);
  s.record_measurement(ok_point(k, k.full, k.w0, 2e-3));
  auto rows = s.measurements({.device_id = k.device, .family = Family::mac});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].m.samples, a.samples);
  rows = s.measurements({.device_id = k.device, .family = Family::full});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].m.samples.empty());
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements WHERE samples_s IS NULL"),
            1);
  // A list that disagrees with the summary's count is refused.
  Measurement b = ok_point(k, k.mac, k.w1, 1e-3);
  b.samples = {1e-3, 2e-3};
  EXPECT_THROW(s.record_measurement(b), Error);
  EXPECT_EQ(samples_text(std::vector<double>{0.00125, 0.5}), "[0.00125,0.5]");
  EXPECT_EQ(parse_samples_text(samples_text(a.samples)), a.samples);
  EXPECT_EQ(parse_samples_text("[ 1e-3,\n2 ]"), (std::vector<double>{1e-3, 2}));
  EXPECT_TRUE(parse_samples_text("[]").empty());
  for (const char* bad : {"", "[", "[1,]", "1,2", "[1 2]", "[1]x", "[a]"})
    EXPECT_THROW(parse_samples_text(bad), InputError) << bad;
}

// A database from before the samples column (v4) migrates: its rows read back no samples.
TEST(Store_Measurement, V4DatabaseMigratesWithoutSamples) {
  TempDir dir;
  const std::vector<Migration> v4 = migrations_up_to(4);
  Measurement m;
  {
    Store old = Store::open(dir.file("a.db"), {.migrations = &v4});
    EXPECT_EQ(old.schema_version(), 4);
    m = insert_old_row(old);
  }
  Store s = Store::open(dir.file("a.db"));
  EXPECT_EQ(s.schema_version(), latest_version(builtin_migrations()));
  const auto rows = s.measurements({.device_id = m.point.device_id});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(rows[0].m.samples.empty());
  EXPECT_EQ(rows[0].m.stats.samples, 5);
}

// measurements_view (what `db export` writes) says which rows are partial (v6), also in a
// file that was created before it.
TEST(Store_Measurement, ExportViewShowsPartial) {
  TempDir dir;
  {
    Store old = Store::open(dir.file("a.db"));
    const Keys k = add_keys(old);
    Measurement p = ok_point(k, k.mac, k.w0, 1e-3);
    p.partial = true;
    old.record_measurement(p);
    old.record_measurement(ok_point(k, k.full, k.w0, 2e-3));
    // Back to v5 (this build writes v8's and v9's columns): without them and without v6's view.
    old.connection().exec(testing::kUndoV9);
    old.connection().exec(
        "DROP VIEW measurements_view;"
        "ALTER TABLE measurements DROP COLUMN kv_tokens_read;"
        "ALTER TABLE measurements DROP COLUMN kv_tokens_total;"
        "DELETE FROM schema_version WHERE version >= 6");
  }
  Store s = Store::open(dir.file("a.db"));
  EXPECT_EQ(s.connection().scalar_int(
                "SELECT COUNT(*) FROM measurements_view WHERE partial = 1 AND family = 'mac'"),
            1);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements_view WHERE partial = 0"),
            1);
}

}  // namespace
}  // namespace mactune::db
