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

// The v6 file, made from the dump with plain SQLite (no mactune code in between).
std::string make_main_v6(const TempDir& dir) {
  std::ifstream in(MACTUNE_TEST_DATA_DIR "/main-v6.sql");
  EXPECT_TRUE(in.good()) << "tests/db/data/main-v6.sql is missing";
  std::stringstream sql;
  sql << in.rdbuf();
  const std::string path = dir.file("main-v6.db");
  Connection c(file_uri(path), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI);
  c.exec(sql.str());
  return path;
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

}  // namespace
}  // namespace mactune::db
