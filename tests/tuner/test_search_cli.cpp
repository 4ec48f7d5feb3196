// `search: halving` through the real binary: every point stored (dropped configs' rows marked
// partial, with fewer samples), a deliberately slowed config dropped and never chosen, the
// decisions drawn from complete rows only, a re-run finding everything stored, and an
// exhaustive re-run completing exactly the partial points.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "cli_util.h"
#include "db/store.h"
#include "slow_backend.h"

namespace mactune::tuner {
namespace {

using testing::run_mactune;
using testing::TempDir;
using testing::tiny_spec;

// 2 buckets x 2 hit rates x 4 chunk sizes = 16 points; 10 samples at most, so the brief rounds
// (2, 4, 8 samples) end below it.
std::string halving_spec(const std::string& name) {
  std::string s = tiny_spec(name, "[1, 2]", "[512]", "[0, 1]", "[32, 64, 128, 256]", 10);
  return s + "search: {strategy: halving, first_samples: 2}\n";
}

std::int64_t scalar(const std::string& db, const std::string& sql) {
  const db::Store s = db::Store::open(db, {.mode = db::OpenMode::read_only});
  return s.connection().scalar_int(sql);
}

TEST(SearchCli, HalvingStoresEveryPointMarksDroppedOnesPartialAndNeverPicksThem) {
  TempDir dir;
  dir.write("h.yaml", halving_spec("h"));
  // The MAC side at chunk_tokens=32 is 5x slower (the tuner in process over the slowed-backend
  // double): halving must drop it in round 0 everywhere.
  const auto t = testing::tune_slowed(dir.path(), "h", {true, {{"chunk_tokens", "32"}}, 5});
  EXPECT_EQ(t.result.points, 16u);
  EXPECT_EQ(t.result.search, "halving");
  EXPECT_GT(t.slowed, 0);
  EXPECT_NE(t.progress.find("halving round 0 (2 samples): MAC configs 4 -> 2"), std::string::npos)
      << t.progress;
  const std::string db = dir.file("h.db");
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements"), 32);
  // Dropped configs: partial, with the brief rounds' samples; survivors complete.
  const auto partial = scalar(db, "SELECT COUNT(*) FROM measurements WHERE partial = 1");
  EXPECT_GT(partial, 0);
  EXPECT_LT(partial, 32);
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements WHERE partial = 1 AND samples >= 10"), 0);
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements WHERE partial = 0 AND samples < 3"), 0);
  EXPECT_EQ(scalar(db,
                   "SELECT COUNT(*) FROM measurements m JOIN instances i ON"
                   " i.id = m.instance_id WHERE i.family = 'mac' AND m.partial = 0 AND"
                   " m.params LIKE '%chunk_tokens=32,%'"),
            0)
      << "the slowed config survived";
  // Each bucket's chosen MAC config has complete rows at every hit rate.
  const db::Store s = db::Store::open(db, {.mode = db::OpenMode::read_only});
  auto q = s.connection().prepare(
      "SELECT b.params, (SELECT COUNT(*) FROM measurements m JOIN workloads w ON"
      " w.id = m.workload_id WHERE m.instance_id = b.instance_id AND m.partial = 0 AND"
      " instr(b.params, m.params || ';') = 1 AND w.batch = b.batch)"
      " FROM best_configs b WHERE b.family = 'mac'");
  int buckets = 0;
  while (q.step()) {
    ++buckets;
    EXPECT_EQ(q.text(0).find("chunk_tokens=32,"), std::string::npos) << q.text(0);
    EXPECT_EQ(q.int64(1), 2) << q.text(0) << ": its rows are not complete at both hit rates";
  }
  EXPECT_EQ(buckets, 2);

  // The same spec again, through the binary: everything is stored.
  auto r = run_mactune(dir, {"tune", "h.yaml", "--no-report"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("0 measured, 16 already stored"), std::string::npos) << r.out;

  // Exhaustive on the same database measures exactly the points halving left partial.
  const auto partial_points =
      scalar(db,
             "SELECT COUNT(DISTINCT m.workload_id || '|' || m.params) FROM measurements m WHERE"
             " m.partial = 1");
  r = run_mactune(dir, {"tune", "h.yaml", "--no-report", "--search", "exhaustive"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ostringstream want;
  want << partial_points << " measured, " << 16 - partial_points << " already stored";
  EXPECT_NE(r.out.find(want.str()), std::string::npos) << want.str() << "\n" << r.out;
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements WHERE partial = 1"), 0);
  EXPECT_EQ(scalar(db, "SELECT COUNT(*) FROM measurements"), 32);
}

// The dry run says which search runs and that its estimate is exhaustive's, a bound.
TEST(SearchCli, DryRunNamesTheSearch) {
  TempDir dir;
  dir.write("h.yaml", halving_spec("h"));
  auto r = run_mactune(dir, {"tune", "h.yaml", "--dry-run", "-q"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("search    halving (brief rounds of 2, 4, ... samples): the time above is "
                       "exhaustive's, a bound"),
            std::string::npos)
      << r.out;
  r = run_mactune(dir, {"tune", "h.yaml", "--dry-run", "-q", "--search", "exhaustive"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("search    exhaustive\n"), std::string::npos) << r.out;
}

TEST(SearchCli, BadSearchIsOneLineExit2) {
  TempDir dir;
  dir.write("b.yaml", tiny_spec("b") + "search: annealing\n");
  auto r = run_mactune(dir, {"tune", "b.yaml"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_NE(r.err.find("b.yaml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("search: unknown search strategy 'annealing'"), std::string::npos) << r.err;
  dir.write("c.yaml", tiny_spec("c"));
  r = run_mactune(dir, {"tune", "c.yaml", "--search", "random"});
  EXPECT_EQ(r.rc, 2) << r.err;
}

}  // namespace
}  // namespace mactune::tuner
