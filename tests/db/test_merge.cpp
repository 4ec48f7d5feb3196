// Merge by natural key (idempotence, shard equivalence, failure/ok precedence, conflicts) and
// the CSV export.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "db/export.h"
#include "db/merge.h"
#include "tests/db/fixtures.h"

namespace mactune::db {
namespace {

using testing::TempDir;
using testing::test_build;
using testing::test_device;
using testing::test_instance;
using testing::test_stats;
using testing::test_workload;

// A small sweep grid: 2 instances x 3 workloads x 2 launch params = 12 points.
struct GridPoint {
  InstanceDesc instance;
  Workload workload;
  std::string params;
  double median_s;
};

std::vector<GridPoint> grid() {
  std::vector<GridPoint> g;
  int i = 0;
  for (const char* family : {"mac", "full"})
    for (double hit : {0.0, 0.5, 0.9})
      for (const char* params : {"chunk_tokens=256,threads=2", "chunk_tokens=512,threads=2"})
        g.push_back({test_instance(family), test_workload(2, 4096, hit), params,
                     1e-4 * (1 + i++) + 1e-6 * hit});
  return g;
}

// Measures `points` of the grid into `path` as a tuner shard would: keys upserted as met (so
// row ids differ between files), one run, one transaction per point.
void run_shard(const std::string& path, const std::vector<GridPoint>& points, int shard,
               int shards) {
  Store s = Store::open(path);
  const Id device = s.upsert_device(test_device());
  const Id build = s.upsert_build(test_build());
  const Id run = s.begin_run({.spec_text = "grid",
                              .shard_index = shard,
                              .shard_count = shards,
                              .device_id = device,
                              .build_id = build});
  for (const GridPoint& p : points) {
    Measurement m;
    m.point = {
        device,     build, s.upsert_instance(p.instance), p.params, s.upsert_workload(p.workload),
        "cpu-wall", true};
    if (s.has_measurement(m.point)) continue;
    m.run_id = run;
    m.stats = test_stats(p.median_s);
    s.record_measurement(m);
  }
  s.finish_run(run, RunStatus::finished);
}

using PointRow = std::tuple<std::string, std::string, std::string, std::string, std::string,
                            std::string, std::int64_t, std::string, double, double, double>;

// Every measurement by natural keys and values: what "the same set of points" means.
std::set<PointRow> point_set(const std::string& path) {
  Store s = Store::open(path, {.mode = OpenMode::read_only});
  auto q = s.connection().prepare(
      "SELECT d.fingerprint, b.git_revision || b.compiler || b.registry_hash, i.name, m.params,"
      " w.key, m.policy, m.cold, m.status, m.median_s, m.q1_s, m.q3_s FROM measurements m"
      " JOIN devices d ON d.id = m.device_id JOIN builds b ON b.id = m.build_id"
      " JOIN instances i ON i.id = m.instance_id JOIN workloads w ON w.id = m.workload_id");
  std::set<PointRow> out;
  while (q.step())
    out.insert({q.text(0), q.text(1), q.text(2), q.text(3), q.text(4), q.text(5), q.int64(6),
                q.text(7), q.real(8), q.real(9), q.real(10)});
  return out;
}

std::map<std::string, std::int64_t> counts(const std::string& path) {
  Store s = Store::open(path, {.mode = OpenMode::read_only});
  std::map<std::string, std::int64_t> out;
  for (const auto& [t, n] : s.table_counts()) out[t] = n;
  return out;
}

TEST(Db_Merge, TwoShardsEqualOneUnshardedRun) {
  TempDir dir;
  const auto g = grid();
  std::vector<GridPoint> shard0, shard1;
  for (std::size_t i = 0; i < g.size(); ++i) (i % 2 ? shard1 : shard0).push_back(g[i]);
  std::reverse(shard1.begin(), shard1.end());  // another upsert order: other row ids
  run_shard(dir.file("shard0.db"), shard0, 0, 2);
  run_shard(dir.file("shard1.db"), shard1, 1, 2);
  run_shard(dir.file("whole.db"), g, 0, 1);

  {
    Store merged = Store::open(dir.file("merged.db"));
    EXPECT_EQ(merge_into(merged, dir.file("shard0.db")).of("measurements"), 6);
    EXPECT_EQ(merge_into(merged, dir.file("shard1.db")).of("measurements"), 6);
  }
  const auto whole = point_set(dir.file("whole.db"));
  EXPECT_EQ(whole.size(), g.size());
  EXPECT_EQ(point_set(dir.file("merged.db")), whole);
  const auto c = counts(dir.file("merged.db"));
  EXPECT_EQ(c.at("runs"), 2);
  EXPECT_EQ(c.at("instances"), 2);
  EXPECT_EQ(c.at("workloads"), 3);
  EXPECT_EQ(c.at("devices"), 1);
  // Each merged point still names the run (and shard) that measured it.
  Store merged = Store::open(dir.file("merged.db"), {.mode = OpenMode::read_only});
  EXPECT_EQ(merged.connection().scalar_int(
                "SELECT COUNT(*) FROM measurements m JOIN runs r ON r.id = m.run_id"
                " WHERE r.shard_count = 2"),
            12);
}

TEST(Db_Merge, MergingTwiceOrIntoItselfAddsNothing) {
  TempDir dir;
  run_shard(dir.file("a.db"), grid(), 0, 1);
  {
    Store a = Store::open(dir.file("a.db"));
    BestConfig b;
    b.device_id = a.upsert_device(test_device());
    b.bucket = Bucket::of(test_workload(2, 4096, 0).problem, 4096);
    b.family = Family::mac;
    b.policy = "cpu-wall";
    b.instance = test_instance("mac").name;
    b.params = "chunk=256,threads=2";
    b.median_s = 1e-4;
    a.write_best_config(b);
  }
  Store c = Store::open(dir.file("c.db"));
  const MergeStats first = merge_into(c, dir.file("a.db"));
  EXPECT_EQ(first.of("measurements"), 12);
  EXPECT_EQ(first.of("best_configs"), 1);
  const auto before = counts(dir.file("c.db"));
  const MergeStats second = merge_into(c, dir.file("a.db"));
  EXPECT_EQ(second.total(), 0);
  EXPECT_TRUE(merge_into(c, dir.file("c.db")).same_file);
  EXPECT_EQ(counts(dir.file("c.db")), before);
  EXPECT_EQ(point_set(dir.file("c.db")), point_set(dir.file("a.db")));

  // And the other way round: the merged copy adds nothing to the original.
  Store a = Store::open(dir.file("a.db"));
  EXPECT_EQ(merge_into(a, dir.file("c.db")).total(), 0);
}

TEST(Db_Merge, OkResultWinsOverFailureInEitherOrder) {
  TempDir dir;
  const GridPoint p = grid()[0];
  auto write = [&](const std::string& path, bool ok) {
    Store s = Store::open(path);
    Measurement m;
    m.point = {s.upsert_device(test_device()),
               s.upsert_build(test_build()),
               s.upsert_instance(p.instance),
               p.params,
               s.upsert_workload(p.workload),
               "cpu-wall",
               true};
    m.status = ok ? PointStatus::ok : PointStatus::failed;
    m.error = ok ? "" : "timed out";
    m.stats = test_stats(p.median_s);
    s.record_measurement(m);
  };
  write(dir.file("ok.db"), true);
  write(dir.file("failed.db"), false);
  for (const bool ok_first : {true, false}) {
    const std::string out = dir.file(ok_first ? "m1.db" : "m2.db");
    Store m = Store::open(out);
    merge_into(m, dir.file(ok_first ? "ok.db" : "failed.db"));
    merge_into(m, dir.file(ok_first ? "failed.db" : "ok.db"));
    auto q = m.connection().prepare("SELECT status, error, median_s FROM measurements");
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.text(0), "ok") << "ok first: " << ok_first;
    EXPECT_EQ(q.text(1), "");
    EXPECT_EQ(q.real(2), p.median_s);
    EXPECT_FALSE(q.step());
  }
}

TEST(Db_Merge, ConflictingInstanceConfigIsRefusedAndChangesNothing) {
  TempDir dir;
  run_shard(dir.file("a.db"), grid(), 0, 1);
  {
    Store b = Store::open(dir.file("b.db"));
    InstanceDesc i = test_instance("mac");
    i.config = "isa=avx512";
    b.upsert_instance(i);
  }
  Store b = Store::open(dir.file("b.db"));
  try {
    merge_into(b, dir.file("a.db"));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mac_cpu_avx2_hd128_bf16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(b.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 0);
  EXPECT_EQ(b.connection().scalar_int("SELECT COUNT(*) FROM instances"), 1);
}

TEST(Db_Merge, BadSourceIsRefusedNamingIt) {
  TempDir dir;
  {
    std::ofstream f(dir.file("junk.db"));
    f << "this is not an SQLite database, just text that is long enough to look like one.";
  }
  Store c = Store::open(dir.file("c.db"));
  EXPECT_THROW(merge_into(c, dir.file("missing.db")), InputError);
  try {
    merge_into(c, dir.file("junk.db"));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("junk.db"), std::string::npos) << e.what();
  }
}

// A minimal RFC 4180 reader for checking the export.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        field += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (ch == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
    } else {
      field += ch;
    }
    any = true;
  }
  if (any && rows.back().empty()) rows.pop_back();
  return rows;
}

TEST(Db_Export, MeasurementsViewCsvRoundTrips) {
  TempDir dir;
  run_shard(dir.file("a.db"), grid(), 0, 1);
  {
    Store s = Store::open(dir.file("a.db"));
    Measurement m;
    // Text with a comma (params), a quote and a line break (error): CSV quoting.
    m.point = {1, 1, 1, "chunk_tokens=64,threads=1", 1, "cpu-wall", false};
    m.status = PointStatus::failed;
    m.error = "refused: \"odd\" head_dim,\ndtype";
    s.record_measurement(m);
  }
  Store s = Store::open(dir.file("a.db"), {.mode = OpenMode::read_only});
  std::ostringstream out;
  EXPECT_EQ(export_csv(s, kDefaultExportTable, out), 13);
  const auto rows = parse_csv(out.str());
  ASSERT_EQ(rows.size(), 14u);
  const auto& header = rows[0];
  const auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<std::size_t>(it - header.begin());
  };
  for (const auto& r : rows) ASSERT_EQ(r.size(), header.size());
  const auto g = grid();
  std::set<double> medians;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i][col("status")] == "failed") {
      EXPECT_EQ(rows[i][col("params")], "chunk_tokens=64,threads=1");
      EXPECT_EQ(rows[i][col("error")], "refused: \"odd\" head_dim,\ndtype");
      EXPECT_EQ(rows[i][col("median_s")], "");  // NULL
      EXPECT_EQ(rows[i][col("cold")], "0");
      continue;
    }
    medians.insert(std::stod(rows[i][col("median_s")]));
    EXPECT_EQ(rows[i][col("device_name")], test_device().name);
    EXPECT_EQ(rows[i][col("batch")], "2");
  }
  std::set<double> expected;
  for (const auto& p : g) expected.insert(p.median_s);
  EXPECT_EQ(medians, expected);  // shortest round-trip text: exact

  std::ostringstream devices;
  EXPECT_EQ(export_csv(s, "devices", devices), 1);
  EXPECT_EQ(devices.str().substr(0, 15), "id,fingerprint,");
  std::ostringstream sink;
  EXPECT_THROW(export_csv(s, "measurements; DROP TABLE runs", sink), InputError);
}

}  // namespace
}  // namespace mactune::db
