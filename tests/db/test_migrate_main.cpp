// Databases written by older builds, opened by this one. Each is the `sqlite3 .dump` of a tiny
// `mactune tune` (data/README.md says how it was made), loaded with plain SQLite.
//
// A database written by a schema-v6 build (main of 2026-12-02, before the chunk knob's rename
// and the typed KV token counts): tests/db/data/main-v6.sql, the `sqlite3 .dump` of a tiny
// `mactune tune` (data/README.md says how it was made). Opening it for writing migrates it;
// every row it held is still read, by the same keys, with what its texts held now typed.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "db/store.h"
#include "tests/db/fixtures.h"

namespace mactune::db {
namespace {

using testing::TempDir;

// The file of a dump, made with plain SQLite (no mactune code in between).
std::string make_from_dump(const TempDir& dir, const std::string& name) {
  std::ifstream in(std::string(MACTUNE_TEST_DATA_DIR "/") + name + ".sql");
  EXPECT_TRUE(in.good()) << "tests/db/data/" << name << ".sql is missing";
  std::stringstream sql;
  sql << in.rdbuf();
  const std::string path = dir.file(name + ".db");
  Connection c(file_uri(path), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI);
  c.exec(sql.str());
  return path;
}
std::string make_main_v6(const TempDir& dir) {
  return make_from_dump(dir, "main-v6");
}

struct OldRow {
  std::string notes;
  std::string params;
  std::string stop_reason;
  std::optional<long long> read, total;  // what its notes' "kv_tokens=READ/TOTAL" held
};

// The rows of the v6 file as they were stored, read with SQL only.
std::map<Id, OldRow> old_measurements(const std::string& path) {
  Connection c(file_uri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  auto s = c.prepare("SELECT id, notes, params, stop_reason FROM measurements");
  std::map<Id, OldRow> out;
  const std::regex kv("kv_tokens=([0-9]+)/([0-9]+)");
  while (s.step()) {
    OldRow r{s.text(1), s.text(2), s.text(3), {}, {}};
    std::smatch m;
    if (std::regex_search(r.notes, m, kv)) {
      r.read = std::stoll(m[1]);
      r.total = std::stoll(m[2]);
    }
    out[s.int64(0)] = r;
  }
  return out;
}

TEST(Db_Migrations, MainV6FileIsReadableWithItsKvTokensTyped) {
  TempDir dir;
  const std::string path = make_main_v6(dir);
  const auto old = old_measurements(path);
  Id device = 0;
  {
    Connection c(file_uri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    EXPECT_EQ(c.scalar_int("SELECT MAX(version) FROM schema_version"), 6);
    device = c.scalar_int("SELECT MIN(id) FROM devices");
  }
  ASSERT_GE(old.size(), 8u);
  std::size_t with_counts = 0;
  for (const auto& [id, r] : old) with_counts += r.read.has_value();
  EXPECT_EQ(with_counts, old.size()) << "every v6 row's notes end in kv_tokens=READ/TOTAL";

  Store s = Store::open(path);
  EXPECT_EQ(s.schema_version(), latest_version(builtin_migrations()));
  MeasurementFilter f;
  f.device_id = device;
  f.ok_only = false;
  const auto rows = s.measurements(f);
  ASSERT_EQ(rows.size(), old.size());
  for (const MeasurementRow& r : rows) {
    const OldRow& o = old.at(r.id);
    EXPECT_EQ(r.m.kv_tokens_read, o.read) << o.notes;
    EXPECT_EQ(r.m.kv_tokens_total, o.total) << o.notes;
    // The notes lose the counts and the "; " before them, nothing else.
    EXPECT_EQ(r.m.notes.find("kv_tokens"), std::string::npos) << r.m.notes;
    EXPECT_EQ(r.m.notes + "; kv_tokens=" + std::to_string(*o.read) + "/" + std::to_string(*o.total),
              o.notes);
    EXPECT_EQ(r.m.point.params, o.params);
    ASSERT_TRUE(r.m.stop_reason.has_value());
    EXPECT_EQ(name_of(*r.m.stop_reason), o.stop_reason);
    // A resumed sweep finds every point again under the same key.
    EXPECT_TRUE(s.has_measurement(r.m.point));
  }
  Store::open(path, {.mode = OpenMode::read_only});  // up to date: readable without writing
}

TEST(Db_Migrations, MainV6FileKeepsItsDecisionsWithOneBreakEvenSpelling) {
  TempDir dir;
  const std::string path = make_main_v6(dir);
  std::map<std::string, std::string> old_status;  // bucket -> status
  std::size_t old_best = 0;
  {
    Connection c(file_uri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    auto q = c.prepare("SELECT bucket, status FROM break_even");
    while (q.step()) old_status[q.text(0)] = q.text(1);
    old_best = static_cast<std::size_t>(c.scalar_int("SELECT COUNT(*) FROM best_configs"));
  }
  ASSERT_FALSE(old_status.empty());
  EXPECT_GT(std::count_if(old_status.begin(), old_status.end(),
                          [](const auto& kv) { return kv.second == "found"; }),
            0)
      << "the fixture should hold a found break-even";
  Store s = Store::open(path);
  const Id device = s.devices().at(0).id;
  const auto be = s.break_evens(device);
  ASSERT_EQ(be.size(), old_status.size());
  for (const BreakEvenRow& b : be) {
    const std::string key = decision_key(b.bucket, std::nullopt, b.extra);
    const std::string was = old_status.at(key);
    EXPECT_EQ(b.status, parse_enum<BreakEvenStatus>(was)) << key;
    EXPECT_EQ(b.hit_rate.has_value(), b.status == BreakEvenStatus::ok) << key;
    EXPECT_EQ(std::string(name_of(b.status)), was == "found" ? "ok" : was);
  }
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM break_even WHERE status = 'found'"), 0);
  EXPECT_EQ(s.best_configs(device).size(), old_best);
  // The table still refuses a status outside the three, and an ok one without its hit rate.
  EXPECT_THROW(s.connection().exec("UPDATE break_even SET status = 'found'"), Error);
  EXPECT_THROW(s.connection().exec("UPDATE break_even SET hit_rate = NULL WHERE status = 'ok'"),
               Error);
}

// main-v8.sql: schema 8 (main of 2026-12-02, before typed launches). Opening it gives every
// measurement its launch row, typed, equal to what its params text says; and every decision a
// reference to a measurement of the config its params text spelt, in its bucket.
TEST(Db_Migrations, MainV8FileGetsTypedLaunchesAndDecisionsReferencingTheirMeasurements) {
  TempDir dir;
  const std::string path = make_from_dump(dir, "main-v8");
  std::size_t distinct_params = 0, old_rows = 0;
  {
    Connection c(file_uri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
    EXPECT_EQ(c.scalar_int("SELECT MAX(version) FROM schema_version"), 8);
    distinct_params =
        static_cast<std::size_t>(c.scalar_int("SELECT COUNT(DISTINCT params) FROM measurements"));
    old_rows = static_cast<std::size_t>(c.scalar_int("SELECT COUNT(*) FROM measurements"));
  }
  ASSERT_GE(distinct_params, 3u) << "the fixture sweeps chunk_tokens and match_mode";
  Store s = Store::open(path);
  EXPECT_EQ(s.schema_version(), latest_version(builtin_migrations()));
  EXPECT_EQ(static_cast<std::size_t>(s.connection().scalar_int("SELECT COUNT(*) FROM launches")),
            distinct_params);
  const Id device = s.devices().at(0).id;
  MeasurementFilter f;
  f.device_id = device;
  f.ok_only = false;
  std::map<Id, MeasurementRow> by_id;
  for (MeasurementRow& r : s.measurements(f)) {
    ASSERT_FALSE(r.launch.empty()) << r.m.point.params;
    EXPECT_EQ(launch_params_text(r.launch), r.m.point.params);
    EXPECT_EQ(r.launch, parse_launch_params(Backend::cpu, r.m.point.params));
    EXPECT_TRUE(s.has_measurement(r.m.point));
    by_id.emplace(r.id, std::move(r));
  }
  ASSERT_EQ(by_id.size(), old_rows);
  // The config a decision's text spells is the referenced row's: instance, launch text, MAC
  // settings (MAC), and the row lies in the decision's bucket.
  const auto expect_config = [&](Id id, const std::string& instance, const std::string& params,
                                 const Bucket& bucket, const std::string& what) {
    ASSERT_NE(id, 0) << what;
    ASSERT_TRUE(by_id.count(id)) << what;
    const MeasurementRow& r = by_id.at(id);
    EXPECT_EQ(r.instance.name, instance) << what;
    EXPECT_EQ(r.m.status, PointStatus::ok) << what;
    const auto semi = params.find(';');
    EXPECT_EQ(r.m.point.params, params.substr(0, semi)) << what;
    if (semi != std::string::npos) {
      EXPECT_EQ(fields_text(r.workload.mac), params.substr(semi + 1));
    }
    EXPECT_EQ(Bucket::of(r.workload.problem, r.workload.context).key(), bucket.key()) << what;
  };
  const auto best = s.best_configs(device);
  ASSERT_GE(best.size(), 4u);
  for (const BestConfig& b : best)
    expect_config(b.measurement_id, b.instance, b.params, b.bucket,
                  b.bucket.key() + "/" + std::string(name_of(b.family)));
  const auto be = s.break_evens(device);
  ASSERT_GE(be.size(), 2u);
  for (const BreakEvenRow& b : be) {
    expect_config(b.mac_measurement_id, b.mac_instance, b.mac_params, b.bucket, "mac side");
    expect_config(b.full_measurement_id, b.full_instance, b.full_params, b.bucket, "full side");
  }
  Store::open(path, {.mode = OpenMode::read_only});  // up to date: readable without writing
  // A referenced row deleted by hand leaves the decision without a reference, not broken.
  const Id gone = best.front().measurement_id;
  s.connection().exec("DELETE FROM measurements WHERE id = " + std::to_string(gone));
  for (const BestConfig& b : s.best_configs(device)) EXPECT_NE(b.measurement_id, gone);
  EXPECT_EQ(s.best_configs(device).front().measurement_id, 0);
}

// A params text the engine table does not read (a file changed by hand, or a field a later
// build removed) keeps its row, without a typed launch; the decision naming it none either.
TEST(Db_Migrations, UnreadableParamsKeepTheirRowsWithoutALaunch) {
  TempDir dir;
  const std::string path = make_from_dump(dir, "main-v8");
  {
    Connection c(file_uri(path), SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI);
    c.exec(
        "UPDATE measurements SET params = 'warp_size=32' WHERE params LIKE '%chunk_tokens=1024%'");
  }
  Store s = Store::open(path);
  EXPECT_EQ(
      s.connection().scalar_int("SELECT COUNT(*) FROM measurements WHERE launch_id IS NULL"),
      s.connection().scalar_int("SELECT COUNT(*) FROM measurements WHERE params = 'warp_size=32'"));
  EXPECT_GT(s.connection().scalar_int("SELECT COUNT(*) FROM measurements WHERE launch_id IS NULL"),
            0);
  MeasurementFilter f;
  f.device_id = s.devices().at(0).id;
  for (const MeasurementRow& r : s.measurements(f))
    EXPECT_EQ(r.launch.empty(), r.m.point.params == "warp_size=32") << r.m.point.params;
}

}  // namespace
}  // namespace mactune::db
