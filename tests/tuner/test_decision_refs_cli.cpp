// Decisions reference what they chose (schema v9): every best_configs / break_even row of a
// real `mactune tune` names a measured row of its config, in its bucket, whose typed launch and
// MAC settings are the config; `emit` reads its incumbents back through those rows, and a
// database written before v9 (tests/db/data/main-v8.sql), migrated by `mactune db migrate`,
// decides as it did.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "cli_util.h"
#include "db/store.h"

namespace mactune::tuner {
namespace {

using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;

// Every decision's reference (and each of its ties') checked against its own text; returns the
// decisions as text (bucket/family -> instance params) for comparing runs. A database written
// before ties carried ids (tie_rows = false) has ties without one.
std::map<std::string, std::string> checked_decisions(const std::string& path,
                                                     bool tie_rows = true) {
  const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
  std::map<std::string, std::string> out;
  const db::Id device = s.devices().at(0).id;
  const auto config_of = [&](db::Id id, const std::string& instance, const std::string& params,
                             const Bucket& bucket, const std::string& what) {
    EXPECT_NE(id, 0) << what;
    db::MeasurementFilter f;
    f.device_id = device;
    f.id = id;
    const auto rows = s.measurements(f);
    ASSERT_EQ(rows.size(), 1u) << what;
    const db::MeasurementRow& r = rows[0];
    EXPECT_EQ(r.instance.name, instance) << what;
    const auto semi = params.find(';');
    EXPECT_EQ(launch_params_text(r.launch), params.substr(0, semi)) << what;
    if (semi != std::string::npos) {
      EXPECT_EQ(fields_text(r.workload.mac), params.substr(semi + 1)) << what;
    }
    EXPECT_EQ(Bucket::of(r.workload.problem, r.workload.context).key(), bucket.key()) << what;
  };
  for (const db::BestConfig& b : s.best_configs(device)) {
    const std::string what = b.bucket.key() + "/" + std::string(name_of(b.family));
    config_of(b.measurement_id, b.instance, b.params, b.bucket, what);
    out[what] = b.instance + " " + b.params;
    EXPECT_FALSE(b.tie_set.empty()) << what << ": the choice is its own tie";
    for (std::size_t i = 0; i < b.tie_set.size(); ++i) {
      const db::TieEntry& t = b.tie_set[i];
      if (tie_rows || t.measurement_id != 0) {
        config_of(t.measurement_id, t.instance, t.params, b.bucket,
                  what + " tie " + std::to_string(i));
      }
      out[what + "/ties"] += t.instance + " " + t.params + " | ";
    }
  }
  for (const db::BreakEvenRow& b : s.break_evens(device)) {
    config_of(b.mac_measurement_id, b.mac_instance, b.mac_params, b.bucket, "break-even MAC");
    config_of(b.full_measurement_id, b.full_instance, b.full_params, b.bucket, "break-even full");
    out[b.bucket.key() + "/break-even"] = std::string(name_of(b.status));
  }
  return out;
}

std::string without_source(const std::string& json) {
  std::istringstream in(json);
  std::string line, out;
  while (std::getline(in, line))
    if (line.find("\"source_database\"") == std::string::npos &&
        line.find("\"time\"") == std::string::npos)
      out += line + "\n";
  return out;
}

TEST(DecisionRefsCli, TunedDecisionsReferenceTheirRowsAndEmitReadsThemBack) {
  TempDir dir;
  dir.write("t.yaml", tiny_spec("t", "[1, 2]", "[256, 512]", "[0, 1]", "[64, 128]", 3));
  auto r = run_mactune(dir, {"tune", "t.yaml", "--no-report", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto first = checked_decisions(dir.file("t.db"));
  EXPECT_EQ(first.size(), 4u * 5u) << "4 buckets: full, mac, their ties, break-even";
  // Deciding again (the stored decisions are the incumbents now) keeps every choice.
  r = run_mactune(dir, {"emit", "--db", "t.db", "-o", "again.json", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(checked_decisions(dir.file("t.db")), first);
  EXPECT_EQ(without_source(testing::read_file(dir.file("again.json"))),
            without_source(testing::read_file(dir.file("t.json"))));
}

// Merged files renumber rows: a decision's reference follows its row by natural key. The
// other database goes in first, so that every row of the tuned one gets another id.
TEST(DecisionRefsCli, MergedDecisionsKeepTheirOwnRows) {
  TempDir dir;
  dir.write("t.yaml", tiny_spec("t", "[1, 2]", "[256, 512]", "[0, 1]", "[64, 128]", 3));
  dir.write("o.yaml", tiny_spec("o", "[1]", "[1024]", "[0, 1]", "[64]", 3));
  for (const char* name : {"t", "o"}) {
    const auto r = run_mactune(dir, {"tune", std::string(name) + ".yaml", "--no-report", "-q"});
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  const auto t = checked_decisions(dir.file("t.db"));
  const auto o = checked_decisions(dir.file("o.db"));
  ASSERT_FALSE(t.empty());
  auto r = run_mactune(dir, {"db", "merge", "o.db", "t.db", "-o", "m.db"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto merged = checked_decisions(dir.file("m.db"));
  EXPECT_EQ(merged.size(), t.size() + o.size()) << "the two hold different buckets";
  for (const auto& [what, choice] : t) EXPECT_EQ(merged.at(what), choice) << what;
  for (const auto& [what, choice] : o) EXPECT_EQ(merged.at(what), choice) << what;
}

TEST(DecisionRefsCli, AMainV8DatabaseMigratesAndDecidesAsBefore) {
  TempDir dir;
  std::ifstream in(MACTUNE_DB_TEST_DATA "/main-v8.sql");
  ASSERT_TRUE(in.good());
  std::stringstream sql;
  sql << in.rdbuf();
  std::map<std::string, std::string> before;
  {
    db::Connection c(db::file_uri(dir.file("v8.db")),
                     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI);
    c.exec(sql.str());
    auto q = c.prepare(
        "SELECT b.bucket, b.family, i.name, b.params FROM best_configs b"
        " JOIN instances i ON i.id = b.instance_id");
    while (q.step()) before[q.text(0) + "/" + q.text(1)] = q.text(2) + " " + q.text(3);
  }
  // A reading command asks for the migration, naming the command.
  auto r = run_mactune(dir, {"db", "info", "--db", "v8.db"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("mactune db migrate --db v8.db"), std::string::npos) << r.err;
  r = run_mactune(dir, {"db", "migrate", "--db", "v8.db"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("schema version 8 -> "), std::string::npos) << r.out;
  r = run_mactune(dir, {"db", "migrate", "--db", "v8.db"});
  EXPECT_NE(r.out.find("up to date"), std::string::npos) << r.out;
  const auto choices = [](std::map<std::string, std::string> m) {
    std::erase_if(m, [](const auto& kv) {
      return kv.first.ends_with("/break-even") || kv.first.ends_with("/ties");
    });
    return m;
  };
  const auto migrated = checked_decisions(dir.file("v8.db"), false);
  EXPECT_EQ(choices(migrated), before);
  // Deciding again from the migrated rows (incumbents through the references) changes nothing.
  r = run_mactune(dir, {"emit", "--db", "v8.db", "-o", "v8.json", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // Its ties are written again, now each with the row of its config.
  const auto again = checked_decisions(dir.file("v8.db"));
  EXPECT_EQ(choices(again), before);
  for (const auto& [what, ties] : migrated)
    if (what.ends_with("/ties")) {
      EXPECT_EQ(again.at(what), ties) << what;
    }
}

}  // namespace
}  // namespace mactune::tuner
