// `mactune tune / emit / report` through the real binary: spec errors, a whole tiny sweep,
// resume after SIGKILL, shards merged, corrupt and read-only databases.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "cli_util.h"
#include "db/store.h"
#include "dispatcher/dispatch.h"

namespace mactune::tuner {
namespace {

using testing::CliOptions;
using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;

// Every stored point as (instance, params, workload key, policy, cold, status).
using PointId = std::tuple<std::string, std::string, std::string, std::string, bool, int>;
std::multiset<PointId> points_of(const std::string& path) {
  const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
  std::multiset<PointId> out;
  for (const auto& d : s.devices()) {
    db::MeasurementFilter f;
    f.device_id = d.id;
    f.ok_only = false;
    for (const auto& r : s.measurements(f))
      out.insert({r.instance.name, r.m.point.params, r.workload.key(), r.m.point.policy,
                  r.m.point.cold, static_cast<int>(r.m.status)});
  }
  return out;
}

std::int64_t count(const std::string& path, const std::string& table) {
  try {
    const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
    for (const auto& [t, n] : s.table_counts())
      if (t == table) return n;
  } catch (const std::exception&) {
  }
  return -1;
}

// Every row of measurements is whole: the file passes SQLite's integrity check and every ok
// row has samples and ordered statistics.
void expect_no_corrupt_rows(const std::string& path) {
  const db::Store s = db::Store::open(path, {.mode = db::OpenMode::read_only});
  auto ic = s.connection().prepare("PRAGMA integrity_check");
  ASSERT_TRUE(ic.step());
  EXPECT_EQ(ic.text(0), "ok");
  auto q = s.connection().prepare(
      "SELECT COUNT(*) FROM measurements WHERE status != 'ok' OR samples < 1 OR"
      " NOT (min_s <= q1_s AND q1_s <= median_s AND median_s <= q3_s AND q3_s <= max_s)");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.int64(0), 0);
}

struct BadSpec {
  std::string name, text, prefix;
};

TEST(TuneCli, SpecErrorsAreOneLineNamingFileLineKeyWithExit2) {
  TempDir dir;
  const std::vector<BadSpec> cases = {
      {"unknown_key", "name: x\nworkload:\n  batch: 1\n  contxt: 4096\n",
       "mactune: error: unknown_key.yaml:4: workload.contxt: unknown key"},
      {"wrong_type", "name: x\nworkload:\n  batch: [1, four]\n",
       "mactune: error: wrong_type.yaml:3: workload.batch: expected a number, got 'four'"},
      {"empty_axis", "name: x\nmac:\n  K: []\n",
       "mactune: error: empty_axis.yaml:3: mac.K: empty list"},
      {"impossible",
       "name: x\nworkload: {context: [512, 1024]}\nconstraints:\n  - r < context\n"
       "  - context > 1M\n",
       "mactune: error: impossible.yaml:5: constraints[1]: 'context > 1M' is impossible"},
      {"bad_device", "name: x\ndevice:\n  backend: cpu\n  name: '*H200*'\n",
       "mactune: error: bad_device.yaml:2: device.name: '*H200*' does not match"},
  };
  for (const auto& c : cases) {
    dir.write(c.name + ".yaml", c.text);
    const auto r = run_mactune(dir, {"tune", c.name + ".yaml", "--db", c.name + ".db"});
    EXPECT_EQ(r.rc, 2) << c.name << ": " << r.err;
    EXPECT_EQ(r.err_lines(), 1) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.rfind(c.prefix, 0), 0u) << c.name << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir.file(c.name + ".db"))) << c.name;
  }
}

// The break-even search: probes stored as points (hit rates off the grid, each with its
// baseline), the bracket in the report, and a re-run that measures nothing (the search state is
// recomputed from the stored curve).
TEST(TuneCli, BreakEvenSearchStoresProbesAndResumes) {
  TempDir dir;
  // Context 2048, 2 x 8 heads: MAC reads ~50 of 2049 tokens at hit rate 1 (clearly faster), all
  // of them at 0; quotas are sixteenths, so at most 4 probes.
  dir.write("s.yaml", tiny_spec("s", "[2]", "[2048]", "[0, 1]", "[128]", 5, "point", "search"));
  auto r = run_mactune(dir, {"tune", "s.yaml"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::set<std::string> rates;
  {
    const db::Store s = db::Store::open(dir.file("s.db"), {.mode = db::OpenMode::read_only});
    db::MeasurementFilter f;
    f.device_id = s.devices().at(0).id;
    for (const auto& row : s.measurements(f))
      rates.insert(db::format_double(row.workload.forced.hit_rate));
  }
  const std::size_t probes = rates.size() - 2;
  EXPECT_GE(probes, 1u) << r.out << r.err;
  EXPECT_LE(probes, 4u);
  EXPECT_EQ(count(dir.file("s.db"), "measurements"), std::int64_t(2 * (2 + probes)));
  EXPECT_NE(r.out.find(std::to_string(probes) + " break-even probes"), std::string::npos) << r.out;
  for (const std::string& h : rates) {
    const double k = std::stod(h) * 16;
    EXPECT_NEAR(k, std::round(k), 1e-9) << h << ": a probe is a quota";
  }
  const std::string md = testing::read_file(dir.file("rep-s/report.md"));
  EXPECT_NE(md.find(" ("), std::string::npos) << "the bracket: " << md;
  auto again = run_mactune(dir, {"tune", "s.yaml"});
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find("0 measured, 2 already stored, 0 failed, 0 break-even probes"),
            std::string::npos)
      << again.out;
  EXPECT_EQ(count(dir.file("s.db"), "measurements"), std::int64_t(2 * (2 + probes)));
}

// The search in shards: grid shards search nothing (each holds part of every bucket); run on
// copies of the merged grid, each shard searches the buckets it owns, the shards' probes are
// disjoint, and their merge holds every bucket's finished search.
TEST(TuneCli, ShardsSearchTheBucketsTheyOwnAfterTheMerge) {
  TempDir dir;
  dir.write("s.yaml", tiny_spec("s", "[1, 2]", "[2048]", "[0, 1]", "[128]", 5, "point", "search"));
  auto tune = [&](const char* shard, const char* db) {
    const auto r = run_mactune(dir, {"tune", "s.yaml", "--shard", shard, "--db", db});
    EXPECT_EQ(r.rc, 0) << r.err;
    return r.out;
  };
  auto probes_of = [&](const char* db) {  // "batch/hit rate" of every probe row
    std::set<std::string> out;
    const db::Store s = db::Store::open(dir.file(db), {.mode = db::OpenMode::read_only});
    db::MeasurementFilter f;
    f.device_id = s.devices().at(0).id;
    for (const auto& row : s.measurements(f))
      if (row.workload.forced.hit_rate != 0 && row.workload.forced.hit_rate != 1)
        out.insert(std::to_string(row.workload.problem.batch) + "/" +
                   db::format_double(row.workload.forced.hit_rate));
    return out;
  };
  EXPECT_NE(tune("0/2", "g0.db").find("0 break-even probes"), std::string::npos);
  EXPECT_NE(tune("1/2", "g1.db").find("0 break-even probes"), std::string::npos);
  ASSERT_EQ(run_mactune(dir, {"db", "merge", "g0.db", "g1.db", "-o", "grid.db"}).rc, 0);
  std::filesystem::copy_file(dir.file("grid.db"), dir.file("p0.db"));
  std::filesystem::copy_file(dir.file("grid.db"), dir.file("p1.db"));
  tune("0/2", "p0.db");
  tune("1/2", "p1.db");
  const auto p0 = probes_of("p0.db"), p1 = probes_of("p1.db");
  EXPECT_GE(p0.size() + p1.size(), 1u) << "MAC is clearly faster at hit rate 1 only: a search";
  for (const auto& p : p0) EXPECT_EQ(p1.count(p), 0u) << p << ": probed by both shards";
  ASSERT_EQ(run_mactune(dir, {"db", "merge", "p0.db", "p1.db", "-o", "all.db"}).rc, 0);
  const auto r = run_mactune(dir, {"tune", "s.yaml", "--db", "all.db", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("0 measured, 4 already stored, 0 failed, 0 break-even probes"),
            std::string::npos)
      << "every search finished in its shard: " << r.out;
}

// `mactune predict` on a database the binary tuned: fitted on two contexts, the third measured
// one is predicted with its error, an unmeasured 1M is predicted alone; bad flags are one line.
TEST(TuneCli, PredictFitsStoredRowsAndPredictsUnseenContexts) {
  TempDir dir;
  dir.write("p.yaml", tiny_spec("p", "[1, 2]", "[512, 1024, 2048]", "[0, 1]", "[64]"));
  ASSERT_EQ(run_mactune(dir, {"tune", "p.yaml", "--no-report"}).rc, 0);
  auto r = run_mactune(dir, {"predict", "--db", "p.db", "--fit-context", "512,1024", "--context",
                             "2048,1M", "--batch", "2", "--hit-rate", "0,1", "--model"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("Models fitted to 8 MAC and 8 full-attention measurements"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| 2048 | 2 | 0 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 1048576 | 2 | 1 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Error on measured points the models did not see: MAC median"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("## Cost model"), std::string::npos);
  for (const auto& [args, prefix] :
       {std::pair{std::vector<std::string>{"--context", "0", "--batch", "1"},
                  "mactune: error: --context '0' is not a positive integer"},
        std::pair{std::vector<std::string>{"--context", "4K", "--batch", "1", "--kv-heads", "3"},
                  "mactune: error: invalid problem: kv_heads = 3"}}) {
    std::vector<std::string> a{"predict", "--db", "p.db"};
    a.insert(a.end(), args.begin(), args.end());
    const auto bad = run_mactune(dir, a);
    EXPECT_EQ(bad.rc, 2) << bad.err;
    EXPECT_EQ(bad.err_lines(), 1) << bad.err;
    EXPECT_EQ(bad.err.rfind(prefix, 0), 0u) << bad.err;
  }
}

TEST(TuneCli, TinySweepStoresEveryPointDecidesEmitsAndReports) {
  TempDir dir;
  dir.write("tiny.yaml", tiny_spec("tiny"));
  auto r = run_mactune(dir, {"tune", "tiny.yaml"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // 2 batches x 2 contexts x 2 hit rates x 2 chunk sizes = 16 points, 2 rows each.
  EXPECT_EQ(count(dir.file("tiny.db"), "measurements"), 32);
  EXPECT_EQ(count(dir.file("tiny.db"), "best_configs"), 4 * 2);  // 4 buckets x {mac, full}
  EXPECT_EQ(count(dir.file("tiny.db"), "break_even"), 4);
  expect_no_corrupt_rows(dir.file("tiny.db"));
  EXPECT_NE(r.out.find("tuned 16 points"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| bucket |"), std::string::npos) << "summary table:\n" << r.out;

  // The emitted table loads through the dispatch loader with this machine's checks.
  std::string warning;
  dispatch::LoadOptions lo;
  lo.warn = [&](std::string_view w) { warning = std::string(w); };
  const auto d = dispatch::Dispatcher::load(dir.file("tiny.json"), lo);
  ASSERT_TRUE(d.table()) << warning;
  EXPECT_EQ(d.table()->entries.size(), 4u);
  Problem p;
  p.batch = 2;
  p.q_heads = 8;
  p.kv_heads = 2;
  p.head_dim = 64;
  const auto choice = d.select(p, 512, 1.0);
  EXPECT_EQ(choice.source, dispatch::ChoiceSource::table);

  for (const char* f : {"rep-tiny/report.md", "rep-tiny/speedup_hd64_q8_kv2_bf16_p16.svg",
                        "rep-tiny/breakeven_hd64_q8_kv2_bf16_p16.svg"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(f))) << f;

  // The same spec again: everything is stored, nothing is measured.
  const auto before = points_of(dir.file("tiny.db"));
  r = run_mactune(dir, {"tune", "tiny.yaml"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("0 measured, 16 already stored"), std::string::npos) << r.out;
  EXPECT_EQ(points_of(dir.file("tiny.db")), before);

  // emit and report from the database alone.
  r = run_mactune(dir,
                  {"emit", "--db", "tiny.db", "-o", "out/t.json", "--header", "out/t.h", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("loads on this machine"), std::string::npos) << r.out;
  EXPECT_TRUE(dispatch::Dispatcher::load(dir.file("out/t.json"), lo).table()) << warning;
  EXPECT_NE(testing::read_file(dir.file("out/t.h")).find("mactune_dispatch"), std::string::npos);
  r = run_mactune(dir, {"report", "--db", "tiny.db", "-o", "rep2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(testing::read_file(dir.file("rep2/report.md")).find("## hd64_q8_kv2_bf16_p16"),
            std::string::npos);
}

TEST(TuneCli, BucketInterleaveSamplesEveryConfigOfABucketTogether) {
  TempDir dir;
  dir.write("il.yaml", tiny_spec("il", "[1, 2]", "[256, 512]", "[0, 1]", "[64, 128]", 3, "bucket"));
  const auto r = run_mactune(dir, {"tune", "il.yaml", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // The two chunk sizes of one bucket and hit rate finish together (in grid order they are
  // eight points apart).
  EXPECT_NE(r.err.find("[2/16] b=1 ctx=256 hit=0 K=64 r=32 threads=1,chunk_tokens=128"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count(dir.file("il.db"), "measurements"), 32);
  expect_no_corrupt_rows(dir.file("il.db"));
  // Every row says how many cases were sampled in turn: two baselines and two MAC sides.
  const db::Store s = db::Store::open(dir.file("il.db"), {.mode = db::OpenMode::read_only});
  auto q = s.connection().prepare(
      "SELECT COUNT(*) FROM measurements WHERE notes LIKE '%interleaved=4;%'");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.int64(0), 32);
}

TEST(TuneCli, KilledWithSigkillResumesAndStoresEveryPointExactlyOnce) {
  TempDir dir;
  // 3 x 2 x 3 x 2 = 36 points of 25 samples a side: a few seconds in all.
  dir.write("kill.yaml",
            tiny_spec("kill", "[1, 2, 4]", "[1K, 2K]", "[0, 0.5, 1]", "[64, 128]", 25));
  const std::string db = dir.file("kill.db");
  CliOptions o;
  o.kill_when = [&] { return count(db, "measurements") >= 8; };
  auto r = run_mactune(dir, {"tune", "kill.yaml"}, o);
  ASSERT_TRUE(r.killed) << "the sweep finished before it could be killed: " << r.err;
  const auto stored = count(db, "measurements");
  EXPECT_GE(stored, 8);
  EXPECT_LT(stored, 72);
  expect_no_corrupt_rows(db);
  const auto partial = points_of(db);

  r = run_mactune(dir, {"tune", "kill.yaml", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto all = points_of(db);
  EXPECT_EQ(all.size(), 72u);
  EXPECT_EQ(std::set<PointId>(all.begin(), all.end()).size(), 72u) << "a point stored twice";
  for (const auto& p : partial)
    EXPECT_EQ(all.count(p), 1u) << "a point stored before the kill was lost";
  expect_no_corrupt_rows(db);
  // The killed run is marked interrupted when the next run starts; the resumed one finished.
  const db::Store s = db::Store::open(db, {.mode = db::OpenMode::read_only});
  auto q = s.connection().prepare("SELECT status FROM runs ORDER BY id");
  std::vector<std::string> statuses;
  while (q.step()) statuses.push_back(q.text(0));
  EXPECT_EQ(statuses, (std::vector<std::string>{"interrupted", "finished"}));
}

TEST(TuneCli, CtrlCStopsBetweenSamplesKeepsEveryPointAndResumes) {
  TempDir dir;
  dir.write("int.yaml", tiny_spec("int", "[1, 2, 4]", "[1K, 2K]", "[0, 0.5, 1]", "[64, 128]", 25));
  const std::string db = dir.file("int.db");
  CliOptions o;
  o.signal = SIGINT;
  o.kill_when = [&] { return count(db, "measurements") >= 6; };
  auto r = run_mactune(dir, {"tune", "int.yaml", "--no-report"}, o);
  ASSERT_TRUE(r.killed) << "the sweep finished before the signal: " << r.err;
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("mactune: error: interrupted"), std::string::npos) << r.err;
  const auto stored = points_of(db);
  EXPECT_EQ(stored.size() % 2, 0u) << "an interrupted point left half a pair";
  {
    const db::Store s = db::Store::open(db, {.mode = db::OpenMode::read_only});
    auto q = s.connection().prepare("SELECT status FROM runs");
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.text(0), "interrupted");
  }
  r = run_mactune(dir, {"tune", "int.yaml", "--no-report", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto all = points_of(db);
  EXPECT_EQ(all.size(), 72u);
  for (const auto& p : stored) EXPECT_EQ(all.count(p), 1u);
}

TEST(TuneCli, TwoShardsMergedEqualOneUnshardedRun) {
  TempDir dir;
  dir.write("sh.yaml", tiny_spec("sh"));
  auto r = run_mactune(dir, {"tune", "sh.yaml", "--shard", "0/2", "--db", "s0.db"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("shard 0/2 done"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("sh.json"))) << "a shard must not emit";
  r = run_mactune(dir, {"tune", "sh.yaml", "--shard", "1/2", "--db", "s1.db", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run_mactune(dir, {"db", "merge", "s0.db", "s1.db", "-o", "merged.db"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run_mactune(dir, {"tune", "sh.yaml", "--db", "whole.db", "--no-emit", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto s0 = points_of(dir.file("s0.db")), s1 = points_of(dir.file("s1.db"));
  EXPECT_EQ(s0.size(), 16u);
  EXPECT_EQ(s1.size(), 16u);
  for (const auto& p : s0) EXPECT_EQ(s1.count(p), 0u) << "shards overlap";
  EXPECT_EQ(points_of(dir.file("merged.db")), points_of(dir.file("whole.db")));
  // The merged shards emit like one run.
  r = run_mactune(dir, {"emit", "--db", "merged.db", "-o", "merged.json", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
}

TEST(TuneCli, CorruptDatabaseIsOneLineWithExit2AndUntouched) {
  TempDir dir;
  dir.write("c.yaml", tiny_spec("c"));
  std::string junk(8192, '\0');
  for (std::size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 131 + 7) & 0xff);
  dir.write("c.db", junk);
  const auto r = run_mactune(dir, {"tune", "c.yaml"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_EQ(r.err.rfind("mactune: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("c.db"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_file(dir.file("c.db")), junk) << "the corrupt file was modified";
}

TEST(TuneCli, ReadOnlyDatabaseIsOneLineWithExit2AndLosesNothing) {
  TempDir dir;
  dir.write("ro.yaml", tiny_spec("ro", "1", "256", "[1]", "64"));
  auto r = run_mactune(dir, {"tune", "ro.yaml", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string before = testing::read_file(dir.file("ro.db"));
  const auto points = points_of(dir.file("ro.db"));
  ASSERT_EQ(points.size(), 2u);
  // A bigger spec on the same file, now read-only: refused before anything is measured.
  dir.write("ro2.yaml", tiny_spec("ro"));
  ASSERT_EQ(chmod(dir.file("ro.db").c_str(), 0444), 0);
  // The report folder the first (privileged) run made stays writable: only the database is
  // read-only (outputs are checked before the database is opened).
  ASSERT_EQ(chmod(dir.file("rep-ro").c_str(), 0777), 0);
  CliOptions o;
  o.unprivileged = true;
  r = run_mactune(dir, {"tune", "ro2.yaml"}, o);
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_EQ(r.err.rfind("mactune: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("read-only"), std::string::npos) << r.err;
  ASSERT_EQ(chmod(dir.file("ro.db").c_str(), 0644), 0);
  EXPECT_EQ(testing::read_file(dir.file("ro.db")), before) << "the read-only file was modified";
  EXPECT_EQ(points_of(dir.file("ro.db")), points);
}

TEST(TuneCli, DryRunListsPointsWithoutMeasuring) {
  TempDir dir;
  dir.write("dry.yaml", tiny_spec("dry"));
  const auto r = run_mactune(dir, {"tune", "dry.yaml", "--dry-run", "--shard", "1/4"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("4 points, 0 stored, 4 to measure"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("dry.db"))) << "a dry run creates no database";
}

// A login node has no GPU: a dry run of a GPU spec lists its points and the time they take
// instead of refusing because no GPU is usable (the device name matches no GPU anywhere).
TEST(TuneCli, DryRunPlansForADeviceThisMachineLacks) {
  TempDir dir;
  dir.write("gpu.yaml",
            "name: gpu\ndevice: {backend: cuda, name: '*NoSuchGPU*'}\n"
            "kernels:\n  cuda: {chunk_tokens: [128, 256]}\n"
            "workload: {batch: [1, 2], context: [32K, 64K], hit_rate: [0, 1]}\n"
            "measure: {time_cap: 10}\n");
  auto r = run_mactune(dir, {"tune", "gpu.yaml", "--dry-run"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("16 points, 0 stored, 16 to measure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device    cuda '*NoSuchGPU*': not this machine ("), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gpu.db does not exist yet"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("time      <= 2m40s by the time caps (16 points x 10 s)"), std::string::npos)
      << r.out;
  r = run_mactune(dir, {"tune", "gpu.yaml", "--dry-run", "--shard", "3/4", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find("hd128"), std::string::npos) << "-q lists no points\n" << r.out;
  EXPECT_NE(r.out.find("4 points, 0 stored, 4 to measure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<= 40s by the time caps (4 points x 10 s)"), std::string::npos) << r.out;
  // Measuring it still needs the GPU.
  r = run_mactune(dir, {"tune", "gpu.yaml"});
  EXPECT_EQ(r.rc, 2) << r.out;
}

// After a run, a dry run shows what is stored and times the rest by the stored points;
// --check passes only when every point is stored.
TEST(TuneCli, DryRunCountsStoredPointsAndTimesTheRestFromTheDatabase) {
  TempDir dir;
  dir.write("a.yaml", tiny_spec("a", "[1]", "[256, 512]", "[0, 1]", "[64]"));
  auto r = run_mactune(dir, {"tune", "a.yaml", "--no-emit", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run_mactune(dir, {"tune", "a.yaml", "--dry-run", "--check"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("4 points, 4 stored, 0 to measure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("this machine's"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("time      nothing to measure"), std::string::npos) << r.out;
  // The same grid with a third hit rate, on the same database: 2 new points, timed by the
  // stored points of their buckets.
  dir.write("b.yaml", tiny_spec("a", "[1]", "[256, 512]", "[0, 0.5, 1]", "[64]"));
  r = run_mactune(dir, {"tune", "b.yaml", "--dry-run"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("6 points, 4 stored, 2 to measure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("from earlier runs (2 timed by their bucket)"), std::string::npos) << r.out;
  r = run_mactune(dir, {"tune", "b.yaml", "--dry-run", "--check", "-q"});
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find("mactune: error: 2 of 6 points of b.yaml are not stored in a.db (grid "
                       "index 1, 4;"),
            std::string::npos)
      << r.err;
  r = run_mactune(dir, {"tune", "a.yaml", "--check"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--check needs --dry-run"), std::string::npos) << r.err;
}

// `mactune info --backend` names the backend the quick start tunes on: cuda exactly when the
// GPU tests would run.
TEST(TuneCli, InfoBackendNamesTheDeviceTheQuickStartTunes) {
  TempDir dir;
  const auto r = run_mactune(dir, {"info", "--backend"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(r.out == "cpu\n" || r.out == "cuda\n") << r.out;
  const auto full = run_mactune(dir, {"info"});
  ASSERT_EQ(full.rc, 0) << full.err;
  EXPECT_NE(full.out.find("  cpu: "), std::string::npos) << full.out;
  if (r.out == "cpu\n") {
    EXPECT_NE(full.out.find("cuda: not usable"), std::string::npos) << full.out;
  }
}

}  // namespace
}  // namespace mactune::tuner
