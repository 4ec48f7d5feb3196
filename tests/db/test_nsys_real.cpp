// nsys import on a real export no one here wrote (tests/db/data/README.md): the pipit saxpy
// profile of nsys 2022.2 (export schema 2.9.1). The oracle is the export itself, read with
// plain SQL: every kernel of CUPTI_ACTIVITY_KIND_KERNEL, every memcpy, every NVTX range with
// its domain, and each kernel's range found from the launching runtime call's correlation id.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "db/nsys.h"
#include "tests/db/fixtures.h"
#include "tests/db/nsys_fixtures.h"

namespace mactune::db {
namespace {

using testing::TempDir;

Connection open_real() {
  return Connection(file_uri(testing::real_export_path(), "immutable=1"),
                    SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
}

using Rows = std::multiset<std::tuple<std::int64_t, std::int64_t, std::string, std::string>>;

Rows query(const Connection& c, const std::string& sql) {
  Rows out;
  auto q = c.prepare(sql);
  while (q.step()) out.insert({q.int64(0), q.int64(1), q.text(2), q.text(3)});
  return out;
}

TEST(Db_NsysRealExport, SaxpyMpiCudaPerlmutterImportsCompletelyTwiceWithoutDuplicates) {
  const Connection src = open_real();
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const NsysImport r = import_nsys(s, testing::real_export_path());
  const Connection& c = s.connection();
  EXPECT_EQ(r.export_schema, "2.9.1");
  EXPECT_EQ(r.nsys_version, "2022.2.1.31");

  // Every kernel, with its times, name and correlation id.
  const Rows kernels_in_file =
      query(src,
            "SELECT k.start, k.end, s.value, k.correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN StringIds s ON s.id = k.demangledName");
  ASSERT_EQ(kernels_in_file.size(), 5u);
  EXPECT_EQ(r.kernels, 5);
  EXPECT_EQ(query(c, "SELECT start_ns, end_ns, name, correlation_id FROM nsys_kernels"),
            kernels_in_file);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_kernels WHERE short_name = 'saxpy'"
                         " AND grid_x = 2 AND block_x = 512 AND registers_per_thread = 26"),
            5);

  // Every memcpy (the report has no memsets), with its bytes.
  ASSERT_EQ(src.scalar_int("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET"), 0);
  EXPECT_EQ(r.memops, 15);
  EXPECT_EQ(query(c, "SELECT start_ns, end_ns, kind || ' ' || copy_kind, bytes FROM nsys_memops"),
            query(src,
                  "SELECT start, end, 'memcpy ' || CASE copyKind WHEN 1 THEN 'Host-to-Device'"
                  " WHEN 2 THEN 'Device-to-Host' END, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY"));

  // Every NVTX push/pop range (eventType 59) with its name and domain; the domain (75) and
  // thread-name (39) events are not ranges.
  const Rows ranges_in_file =
      query(src,
            "SELECT n.start, n.end, COALESCE(n.text, s.value),"
            " COALESCE((SELECT d.text FROM NVTX_EVENTS d WHERE d.eventType = 75"
            " AND d.domainId = n.domainId), '') FROM NVTX_EVENTS n LEFT JOIN StringIds s"
            " ON s.id = n.textId WHERE n.eventType = 59");
  ASSERT_EQ(ranges_in_file.size(), 22u);
  EXPECT_EQ(r.ranges, 22);
  EXPECT_EQ(query(c, "SELECT start_ns, end_ns, name, domain FROM nsys_ranges"), ranges_in_file);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_ranges WHERE domain = 'MPI'"), 17);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_ranges WHERE name = 'saxpy' AND domain = ''"
                         " AND kind = 'push_pop' AND pid = 1230493 AND tid = 1230493"),
            5);

  // Each kernel's range, from the file: the outermost runtime call of its correlation id
  // (each launch is recorded twice: cudaLaunchKernel around cudaLaunchKernel_v7000), then the
  // innermost push/pop range on that call's thread around the call's start.
  const Rows attributed_in_file =
      query(src,
            "WITH launch AS (SELECT correlationId AS corr, globalTid AS gtid, MIN(start) AS t"
            " FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY correlationId)"
            " SELECT k.start, l.t, (SELECT COALESCE(n.text, s.value) FROM NVTX_EVENTS n"
            " LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59"
            " AND n.globalTid = l.gtid AND n.start <= l.t AND l.t <= n.end"
            " ORDER BY n.start DESC LIMIT 1), (SELECT n.rowid FROM NVTX_EVENTS n WHERE"
            " n.eventType = 59 AND n.globalTid = l.gtid AND n.start <= l.t AND l.t <= n.end"
            " ORDER BY n.start DESC LIMIT 1) FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN launch l ON l.corr = k.correlationId");
  ASSERT_EQ(attributed_in_file.size(), 5u);
  for (const auto& row : attributed_in_file) EXPECT_EQ(std::get<2>(row), "saxpy");
  EXPECT_EQ(
      query(c, "SELECT start_ns, launch_start_ns, nvtx_range, nvtx_range_seq FROM nsys_kernels"),
      attributed_in_file);
  EXPECT_EQ(r.kernels_in_ranges, 5);
  // Five saxpy ranges, one kernel each: the range rows the kernels name are five different ones.
  EXPECT_EQ(c.scalar_int("SELECT COUNT(DISTINCT g.id) FROM nsys_kernels k JOIN nsys_ranges g"
                         " ON g.report_id = k.report_id AND g.seq = k.nvtx_range_seq"
                         " WHERE g.name = 'saxpy'"),
            5);
  // Every copy has its launching call (cudaMemcpy, recorded twice as well).
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_memops WHERE launch_start_ns IS NOT NULL"), 15);

  // Twice in a row: the second import adds nothing.
  const auto counts = s.table_counts();
  const NsysImport again = import_nsys(s, testing::real_export_path());
  EXPECT_TRUE(again.already_imported);
  EXPECT_EQ(again.report_id, r.report_id);
  EXPECT_EQ(again.kernels, 5);
  EXPECT_EQ(s.table_counts(), counts);
}

// The UNIQUE failure of issue 21 came from joining each kernel to every runtime row of its
// correlation id; the report records each launch twice. The import names it in a note.
TEST(Db_NsysRealExport, DuplicateLaunchRecordsAreFoldedIntoTheOutermostCall) {
  const Connection src = open_real();
  ASSERT_EQ(src.scalar_int("SELECT COUNT(*) FROM (SELECT correlationId FROM"
                           " CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY correlationId"
                           " HAVING COUNT(*) = 2)"),
            38);
  TempDir dir;
  Store s = Store::open(dir.file("a.db"));
  const NsysImport r = import_nsys(s, testing::real_export_path());
  bool noted = false;
  for (const auto& n : r.notes) noted |= n.find("the outermost is the launch") != std::string::npos;
  EXPECT_TRUE(noted) << ::testing::PrintToString(r.notes);
  EXPECT_EQ(s.connection().scalar_int(
                "SELECT COUNT(*) FROM nsys_kernels WHERE launch_start_ns IN (924889832,"
                " 1196025022, 1449144833, 1696242840, 1947750166)"),
            5);
}

}  // namespace
}  // namespace mactune::db
