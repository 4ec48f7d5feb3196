// What the Slurm tests share: a small CPU spec whose points take a known time, and readers of
// the shard databases (every stored point, the runs of a shard).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "db/store.h"
#include "dispatcher/table.h"
#include "tests/tuner/cli_util.h"

namespace mactune::test_slurm {

using tuner::testing::read_file;
using tuner::testing::run_mactune;
using tuner::testing::TempDir;

// 12 points (3 contexts x 2 hit rates x 2 chunk sizes), 4 per shard of 3. Every point samples
// until its time cap (the noise target 0 is never met), so a shard takes about 4 x 0.3 s and a
// task can be stopped part way. Non-default decision rules, so the finish job must pass them.
inline std::string sweep_spec(const std::string& name, double time_cap = 0.3) {
  return "name: " + name +
         "\n"
         "device: {backend: cpu}\n"
         "kernels:\n  cpu: {chunk_tokens: [64, 128], threads: 1}\n"
         "mac: {K: 64, r: 32}\n"
         "workload:\n"
         "  batch: 1\n  context: [256, 512, 1024]\n"
         "  q_heads: 8\n  kv_heads: 2\n  head_dim: 64\n  dtype: bf16\n"
         "  hit_rate: [0, 1]\n  lag: uniform(1,16)\n"
         "constraints: [r < context]\n"
         "measure: {warmup: 1, min_samples: 3, max_samples: 1000000, noise: 0, min_time: 100,\n"
         "          stable_window: 1000000, time_cap: " +
         std::to_string(time_cap) +
         ", mode: hot}\n"
         "decide: {tie_tolerance: 0.05, ties: tolerance}\n"
         "output: {db: results/" +
         name + ".db, dispatch: dispatch/" + name + ".json, report: reports/" + name + "}\n";
}
inline constexpr std::size_t kSweepPoints = 12;

// Every stored measurement row of a database as (instance, params, workload, status).
using Row = std::tuple<std::string, std::string, std::string, int>;
inline std::multiset<Row> rows_of(const std::string& path) {
  std::multiset<Row> out;
  const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
  for (const auto& d : s.devices()) {
    db::MeasurementFilter f;
    f.device_id = d.id;
    f.ok_only = false;
    for (const auto& r : s.measurements(f))
      out.insert({r.instance.name, r.m.point.params, r.workload.key(), int(r.m.status)});
  }
  return out;
}

// Stored MAC rows of a database; -1 while it cannot be read (not created yet).
inline int mac_rows(const std::string& path) {
  try {
    const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
    auto q = s.connection().prepare(
        "SELECT COUNT(*) FROM measurements m JOIN instances i ON i.id = m.instance_id"
        " WHERE i.family = 'mac'");
    return q.step() ? static_cast<int>(q.int64(0)) : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

// The runs of a shard database in order: (status, MAC rows that run stored).
inline std::vector<std::pair<std::string, int>> runs_of(const std::string& path) {
  const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
  auto q = s.connection().prepare(
      "SELECT r.status, (SELECT COUNT(*) FROM measurements m JOIN instances i"
      " ON i.id = m.instance_id WHERE m.run_id = r.id AND i.family = 'mac')"
      " FROM runs r ORDER BY r.id");
  std::vector<std::pair<std::string, int>> out;
  while (q.step()) out.emplace_back(q.text(0), static_cast<int>(q.int64(1)));
  return out;
}

// What the finish job's table decides, next to what `mactune emit` decides from the same
// stored rows: merged here from the shard databases, decided with the spec's rules.
inline void expect_finish_table_equals_emit(const TempDir& dir, const std::string& name,
                                            int shards) {
  std::vector<std::string> merge = {"db", "merge"};
  for (int i = 0; i < shards; ++i)
    merge.push_back("jobs/shards/shard-" + std::to_string(i) + ".db");
  merge.insert(merge.end(), {"-o", "check.db"});
  auto r = run_mactune(dir, merge);
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run_mactune(dir, {"emit", "--db", "check.db", "--tie-tolerance", "0.05", "--ties",
                        "tolerance", "-o", "check.json", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const dispatch::DispatchTable job = dispatch::read_table(dir.file("dispatch/" + name + ".json"));
  const dispatch::DispatchTable emit = dispatch::read_table(dir.file("check.json"));
  EXPECT_EQ(job.device, emit.device);
  ASSERT_EQ(job.entries.size(), emit.entries.size());
  for (std::size_t i = 0; i < job.entries.size(); ++i)
    EXPECT_EQ(job.entries[i], emit.entries[i]) << "entry " << i;
  // Every point stored exactly once: the shards are disjoint and together the grid (two rows,
  // MAC and full, a point), and the merged database holds each of them once.
  std::multiset<Row> all;
  for (int i = 0; i < shards; ++i)
    for (const Row& row : rows_of(dir.file("jobs/shards/shard-" + std::to_string(i) + ".db")))
      all.insert(row);
  EXPECT_EQ(all.size(), 2 * kSweepPoints);
  EXPECT_EQ(std::set<Row>(all.begin(), all.end()).size(), all.size()) << "a point stored twice";
  EXPECT_EQ(rows_of(dir.file("results/" + name + ".db")), all);
  for (const Row& row : all) EXPECT_EQ(std::get<3>(row), int(db::PointStatus::ok));
}

}  // namespace mactune::test_slurm
