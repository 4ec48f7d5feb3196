// nsys import on one logical profile written in the tables of every export variant
// (tests/db/nsys_fixtures.h): names through StringIds or inline, registered NVTX strings,
// domains, eventType ids from ENUM tables or the historical ones, launches recorded twice
// under one correlation id, correlation ids repeated across processes, idempotence, merge,
// and the error cases.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "db/merge.h"
#include "db/nsys.h"
#include "db/nsys_summary.h"
#include "tests/db/fixtures.h"
#include "tests/db/nsys_fixtures.h"

namespace mactune::db {
namespace {

using testing::ExportSchema;
using testing::SynthOp;
using testing::SynthRange;
using testing::TempDir;

constexpr const char* kAttend = "attend_cuda_hd128_g4_t64_s2_bf16";
constexpr const char* kMatch = "match_cuda_hd128_k512_bf16";
constexpr const char* kFull = "full_cuda_hd128_g4_bf16";
constexpr std::int64_t kPid = 4242, kTid = 4243, kTid2 = 4250, kPidB = 5000, kTidB = 5001;

const std::string kMatchKernel = "void mactune::cuda::match_kernel<MatchConfig<128, 512>>(Params)";
const std::string kAttendKernel =
    "void mactune::cuda::attend_kernel<AttendConfig<128, 4, 64, 2>>(Params)";

// One decode step on thread T (and an attend launch on T2) under nested NVTX ranges of domain
// "mactune", a second process whose correlation ids collide with the first's, a memcpy and a
// memset; partial-range variants add a range still open when the capture ended (written last,
// so the rows before it keep their positions in every variant).
testing::SynthProfile variant_profile() {
  testing::SynthProfile p;
  const auto range = [&](SynthRange::Kind k, std::int64_t s, std::optional<std::int64_t> e,
                         const std::string& name, std::int64_t tid, bool registered = false,
                         std::int64_t domain = 1, std::int64_t pid = kPid) {
    p.ranges.push_back({k, s, e, name, pid, tid, domain, registered});
  };
  range(SynthRange::domain_create, 0, {}, "mactune", kTid);
  range(SynthRange::category, 0, {}, "phases", kTid);
  range(SynthRange::start_end, 50, 20000, "step 3", kTid);
  range(SynthRange::push_pop, 100, 10000, "tune hd128_b4_c32768 b=4 ctx=32768 hit=0.9", kTid);
  range(SynthRange::push_pop, 200, 900, std::string("match/") + kMatch, kTid, true);
  range(SynthRange::push_pop, 1000, 2000, std::string("attend/") + kAttend, kTid, true);
  range(SynthRange::push_pop, 1100, 1200, "plan", kTid);
  range(SynthRange::mark, 5000, {}, "checkpoint", kTid, false, 0);
  range(SynthRange::push_pop, 0, 100000, std::string("attend/") + kAttend, kTid2, true);
  range(SynthRange::domain_create, 0, {}, "rank1", kTidB, false, 1, kPidB);
  range(SynthRange::push_pop, 0, 50000, "rank 1 step", kTidB, false, 1, kPidB);
  range(SynthRange::push_only, 30000, {}, "open range", kTid);

  const auto op = [&](SynthOp::Kind k, std::int64_t start, const std::string& name,
                      std::int64_t corr, std::optional<std::int64_t> launch, std::int64_t tid,
                      bool nested = false, std::int64_t pid = kPid) {
    SynthOp o{k, start, start + 250, name, pid, corr, launch, tid, nested};
    o.bytes = k == SynthOp::memcpy ? 1 << 20 : 4096;
    p.ops.push_back(o);
  };
  op(SynthOp::kernel, 400, kMatchKernel, 11, 300, kTid);
  op(SynthOp::kernel, 1300, kAttendKernel, 12, 1150, kTid, true);
  op(SynthOp::kernel, 5100, std::string("void ") + kFull + "(Params)", 13, 5000, kTid);
  op(SynthOp::kernel, 15100, "void other_kernel()", 14, 15000, kTid);
  op(SynthOp::kernel, 16000, "void lost_kernel()", 99, std::nullopt, kTid);
  op(SynthOp::kernel, 600, kAttendKernel, 17, 500, kTid2);
  op(SynthOp::kernel, 31000, "void late_kernel()", 18, 30500, kTid);
  op(SynthOp::kernel, 800, "void rank1_kernel()", 11, 700, kTidB, true, kPidB);
  op(SynthOp::memcpy, 260, "", 20, 250, kTid, true);
  op(SynthOp::memset, 1180, "", 21, 1120, kTid);
  return p;
}

Store store_with_instances(const std::string& path) {
  Store s = Store::open(path);
  auto cuda = [](const char* name, Family family, const char* config) {
    return InstanceDesc::named(name, Backend::cuda, family, config);
  };
  s.upsert_instance(cuda(kAttend, Family::attend, "hd=128,g=4,t=64,s=2,kv=bf16"));
  s.upsert_instance(cuda(kMatch, Family::match, "hd=128,k=512,kv=bf16"));
  s.upsert_instance(cuda(kFull, Family::full, "hd=128,g=4,kv=bf16"));
  return s;
}

struct KernelRow {
  std::string instance, range;
  std::int64_t duration, pid, tid;
};

// Kernels by name (suffixed "@T2" for the launch on the second thread).
std::map<std::string, KernelRow> kernels_by_name(const Store& s) {
  auto q = s.connection().prepare(
      "SELECT k.name, COALESCE(i.name, ''), COALESCE(k.nvtx_range, '<none>'),"
      " k.end_ns - k.start_ns, COALESCE(k.pid, -1), COALESCE(k.launch_tid, -1)"
      " FROM nsys_kernels k LEFT JOIN instances i ON i.id = k.instance_id");
  std::map<std::string, KernelRow> out;
  while (q.step())
    out[q.text(0) + (q.int64(5) == kTid2 ? "@T2" : "")] = {q.text(1), q.text(2), q.int64(3),
                                                           q.int64(4), q.int64(5)};
  return out;
}

// Every imported row as text, without the rows only partial-range variants have.
std::string dump(const Store& s) {
  std::string out;
  const auto add = [&](const std::string& sql) {
    auto q = s.connection().prepare(sql);
    while (q.step()) {
      for (int c = 0; c < q.column_count(); ++c) {
        if (c > 0) out += '|';
        out += q.text(c);
      }
      out += "\n";
    }
  };
  add("SELECT k.seq, k.start_ns, k.end_ns, k.name, COALESCE(i.name, ''), k.pid, k.launch_tid,"
      " k.launch_start_ns, k.correlation_id, COALESCE(k.nvtx_range, ''), k.nvtx_range_seq,"
      " k.stream_id FROM nsys_kernels k LEFT JOIN instances i ON i.id = k.instance_id"
      " WHERE k.name != 'void late_kernel()' ORDER BY k.seq");
  add("SELECT seq, kind, start_ns, end_ns, name, domain, pid, tid FROM nsys_ranges"
      " WHERE name != 'open range' ORDER BY seq");
  add("SELECT kind, seq, start_ns, end_ns, bytes, copy_kind, launch_tid, launch_start_ns,"
      " nvtx_range, nvtx_range_seq FROM nsys_memops ORDER BY kind, seq");
  return out;
}

class Db_NsysSchemas : public ::testing::TestWithParam<ExportSchema> {};

TEST_P(Db_NsysSchemas, EveryRowOnceAttributedByLaunch) {
  TempDir dir;
  const std::string report = dir.file("report.sqlite");
  testing::write_export(report, GetParam(), variant_profile());
  Store s = store_with_instances(dir.file("a.db"));
  const NsysImport r = import_nsys(s, report);
  const bool partial = testing::has_partial_ranges(GetParam());
  EXPECT_FALSE(r.already_imported);
  EXPECT_EQ(r.kernels, 8);
  EXPECT_EQ(r.memops, 2);
  EXPECT_EQ(r.ranges, partial ? 9 : 8);  // 7 ranges + 1 mark (+ the open one)
  EXPECT_EQ(r.ranges_linked, 3);
  EXPECT_EQ(r.kernels_linked, 4);
  EXPECT_EQ(r.kernels_in_ranges, partial ? 7 : 6);

  const auto k = kernels_by_name(s);
  ASSERT_EQ(k.size(), 8u);
  const auto& match = k.at(kMatchKernel);
  EXPECT_EQ(match.instance, kMatch);
  EXPECT_EQ(match.range, std::string("match/") + kMatch);
  EXPECT_EQ(match.duration, 250);
  EXPECT_EQ(match.pid, kPid);
  EXPECT_EQ(match.tid, kTid);
  // Launched inside "plan" inside the attend range: innermost is "plan", the instance is the
  // nearest enclosing range that names one. Its launch is recorded twice (inner row first).
  const auto& attend = k.at(kAttendKernel);
  EXPECT_EQ(attend.instance, kAttend);
  EXPECT_EQ(attend.range, "plan");
  // Its own name links it; its launch (5000) falls in the tuner range.
  const auto& full = k.at(std::string("void ") + kFull + "(Params)");
  EXPECT_EQ(full.instance, kFull);
  EXPECT_EQ(full.range, "tune hd128_b4_c32768 b=4 ctx=32768 hit=0.9");
  EXPECT_EQ(k.at("void other_kernel()").range, "step 3");  // only the process range is open
  EXPECT_EQ(k.at("void lost_kernel()").range, "<none>");
  EXPECT_EQ(k.at("void lost_kernel()").instance, "");
  EXPECT_EQ(k.at(kAttendKernel + "@T2").instance, kAttend);
  EXPECT_EQ(k.at("void late_kernel()").range, partial ? "open range" : "<none>");
  // Correlation id 11 exists in both processes: each kernel finds its own process's launch.
  EXPECT_EQ(k.at("void rank1_kernel()").range, "rank 1 step");
  EXPECT_EQ(k.at("void rank1_kernel()").pid, kPidB);

  const auto& c = s.connection();
  auto q = c.prepare(
      "SELECT kind, start_ns, end_ns IS NULL, domain, tid FROM nsys_ranges WHERE name = ?1");
  q.bind(1, std::string("match/") + kMatch);  // registered: text NULL, name through textId
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.text(0), "push_pop");
  EXPECT_EQ(q.int64(1), 200);
  EXPECT_EQ(q.int64(2), 0);
  EXPECT_EQ(q.text(3), "mactune");
  EXPECT_EQ(q.int64(4), kTid);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_ranges WHERE kind = 'mark' AND end_ns IS NULL"
                         " AND domain = '' AND name = 'checkpoint'"),
            1);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_ranges WHERE name = 'rank 1 step'"
                         " AND domain = 'rank1' AND pid = 5000"),
            1);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_ranges WHERE kind = 'start_end'"), 1);
  if (partial) {
    EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_ranges WHERE name = 'open range'"
                           " AND kind = 'push_pop' AND end_ns IS NULL"),
              1);
  }
  // The memcpy (launch at 250, recorded twice) in the match range, the memset in "plan".
  auto m = c.prepare(
      "SELECT kind, bytes, copy_kind, nvtx_range, launch_start_ns FROM nsys_memops ORDER BY kind");
  ASSERT_TRUE(m.step());
  EXPECT_EQ(m.text(0), "memcpy");
  EXPECT_EQ(m.int64(1), 1 << 20);
  EXPECT_EQ(m.text(2), "Host-to-Device");
  EXPECT_EQ(m.text(3), std::string("match/") + kMatch);
  EXPECT_EQ(m.int64(4), 250);
  ASSERT_TRUE(m.step());
  EXPECT_EQ(m.text(0), "memset");
  EXPECT_EQ(m.text(3), "plan");
  EXPECT_FALSE(m.step());
  // The kernel's range row is the one it names, even where names repeat.
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_kernels k JOIN nsys_ranges g"
                         " ON g.report_id = k.report_id AND g.seq = k.nvtx_range_seq"
                         " WHERE g.name = k.nvtx_range AND g.start_ns <= k.launch_start_ns"),
            partial ? 7 : 6);

  // Twice in a row: nothing added.
  const NsysImport again = import_nsys(s, report);
  EXPECT_TRUE(again.already_imported);
  EXPECT_EQ(again.report_id, r.report_id);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_kernels"), 8);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_memops"), 2);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_reports"), 1);
}

// Whatever tables carried them, the same profile imports to the same rows.
TEST_P(Db_NsysSchemas, SameRowsAsTheOldestLayout) {
  TempDir dir;
  const auto import_dump = [&](ExportSchema schema, const std::string& name) {
    testing::write_export(dir.file(name + ".sqlite"), schema, variant_profile());
    Store s = store_with_instances(dir.file(name + ".db"));
    import_nsys(s, dir.file(name + ".sqlite"));
    return dump(s);
  };
  const std::string oldest = import_dump(ExportSchema::nsys2020, "oldest");
  ASSERT_NE(oldest.find("rank 1 step"), std::string::npos);
  EXPECT_EQ(import_dump(GetParam(), "this"), oldest);
}

INSTANTIATE_TEST_SUITE_P(Variants, Db_NsysSchemas,
                         ::testing::Values(ExportSchema::nsys2020, ExportSchema::real_2_9_1,
                                           ExportSchema::v2_enums, ExportSchema::v3_16,
                                           ExportSchema::remapped, ExportSchema::text_names),
                         [](const auto& p) { return testing::schema_name(p.param); });

TEST(Db_NsysImport, MergeKeepsEveryRowAndLink) {
  TempDir dir;
  testing::write_export(dir.file("report.sqlite"), ExportSchema::v3_16, variant_profile());
  {
    Store s = store_with_instances(dir.file("a.db"));
    import_nsys(s, dir.file("report.sqlite"));
  }
  Store b = Store::open(dir.file("b.db"));
  const MergeStats first = merge_into(b, dir.file("a.db"));
  EXPECT_EQ(first.of("nsys_kernels"), 8);
  EXPECT_EQ(first.of("nsys_memops"), 2);
  EXPECT_EQ(first.of("nsys_ranges"), 9);
  EXPECT_EQ(merge_into(b, dir.file("a.db")).total(), 0);
  EXPECT_EQ(kernels_by_name(b).at(std::string("void ") + kFull + "(Params)").instance, kFull);
}

// Reports imported by a v1 database stay, with NULL where v2 added columns; new ones import.
TEST(Db_NsysImport, Version1DatabaseMigratesKeepingImportedReports) {
  TempDir dir;
  const std::vector<Migration> v1 = {builtin_migrations().front()};
  {
    Store s = Store::open(dir.file("a.db"), {.migrations = &v1});
    s.connection().exec(
        "INSERT INTO nsys_reports (content_hash, path, kernels, ranges, imported_at)"
        " VALUES ('0123', 'old.sqlite', 1, 0, '2026-11-30T00:00:00Z');"
        "INSERT INTO nsys_kernels (report_id, seq, start_ns, end_ns, name)"
        " VALUES (1, 1, 10, 30, 'old_kernel')");
  }
  Store s = Store::open(dir.file("a.db"));
  EXPECT_EQ(s.schema_version(), latest_version(builtin_migrations()));
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM nsys_kernels"
                                      " WHERE launch_start_ns IS NULL AND nvtx_range_seq IS NULL"),
            1);
  const NsysSummary old = summarize_nsys(s, 1, {});
  EXPECT_EQ(old.kernels, 1);
  EXPECT_DOUBLE_EQ(old.kernel_ns, 20);
  testing::write_export(dir.file("r.sqlite"), ExportSchema::v3_16, variant_profile());
  EXPECT_EQ(import_nsys(s, dir.file("r.sqlite")).kernels, 8);
}

// A decode loop of 1000 steps: every kernel and copy once, each in its phase and its step.
TEST(Db_NsysImport, DecodeLoopAtScaleEveryOperationOnceInItsStep) {
  TempDir dir;
  testing::write_export(dir.file("r.sqlite"), ExportSchema::real_2_9_1,
                        testing::decode_profile(1000, 9));
  Store s = Store::open(dir.file("a.db"));
  const NsysImport r = import_nsys(s, dir.file("r.sqlite"));
  EXPECT_EQ(r.kernels, 9000);
  EXPECT_EQ(r.memops, 1000);
  EXPECT_EQ(r.ranges, 4000);
  EXPECT_EQ(r.kernels_in_ranges, 9000);
  const auto& c = s.connection();
  // Each kernel's innermost range is a phase, the one its name says, in its own step.
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_kernels k JOIN nsys_ranges g"
                         " ON g.report_id = k.report_id AND g.seq = k.nvtx_range_seq"
                         " WHERE instr(k.name, g.name || '_kernel') > 0"
                         " AND g.start_ns / 100000 = k.launch_start_ns / 100000"),
            9000);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_memops WHERE nvtx_range = 'step'"), 1000);
  const NsysSummary sum = summarize_nsys(s, r.report_id, {.range_pattern = "step"});
  ASSERT_EQ(sum.range_rows.size(), 1u);
  EXPECT_EQ(sum.range_rows[0].instances, 1000);
  EXPECT_EQ(sum.range_rows[0].kernels, 9000);
  EXPECT_EQ(sum.range_rows[0].gaps.count, 8000);
  EXPECT_TRUE(import_nsys(s, dir.file("r.sqlite")).already_imported);
  EXPECT_EQ(c.scalar_int("SELECT COUNT(*) FROM nsys_kernels"), 9000);
}

TEST(Db_NsysImport, OldestLayoutWithoutRuntimeOrNvtx) {
  TempDir dir;
  {
    Connection r(dir.file("old.sqlite"), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    r.exec(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, shortName TEXT);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 30, 'match_cuda_hd128_k512_bf16');"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (40, 45, 'memset');");
  }
  Store s = store_with_instances(dir.file("a.db"));
  const NsysImport r = import_nsys(s, dir.file("old.sqlite"));
  EXPECT_EQ(r.kernels, 2);
  EXPECT_EQ(r.kernels_linked, 1);
  EXPECT_EQ(r.ranges, 0);
  EXPECT_EQ(r.notes.size(), 2u) << ::testing::PrintToString(r.notes);  // no NVTX, no API calls
  EXPECT_EQ(kernels_by_name(s).at("memset").duration, 5);
}

TEST(Db_NsysImport, BadReportsAreRefusedInOneLineNamingWhatIsMissing) {
  TempDir dir;
  Store s = store_with_instances(dir.file("a.db"));
  const auto expect_error = [&](const std::string& path, const std::string& needle) {
    try {
      import_nsys(s, path);
      ADD_FAILURE() << "expected an InputError for " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  const auto make = [&](const std::string& name, const std::string& sql) {
    Connection r(dir.file(name), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    r.exec(sql);
    return dir.file(name);
  };
  expect_error(dir.file("missing.sqlite"), "does not exist");
  {
    std::ofstream f(dir.file("text.sqlite"));
    f << "nsys-rep files are not SQLite; this text is not either. It is long enough.\n";
  }
  expect_error(dir.file("text.sqlite"), "not an SQLite file");
  expect_error(make("other.sqlite", "CREATE TABLE results (x INTEGER)"),
               "not an nsys SQLite export");
  expect_error(make("no_type.sqlite", "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER)"),
               "table NVTX_EVENTS has no column 'eventType'");
  expect_error(make("no_name.sqlite", "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end)"),
               "neither 'demangledName' nor 'shortName'");
  expect_error(make("no_end.sqlite",
                    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, shortName TEXT)"),
               "CUPTI_ACTIVITY_KIND_KERNEL has no column 'end'");
  expect_error(
      make("no_strings.sqlite",
           "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, shortName INT);"
           "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 3);"
           "CREATE TABLE EXPORT_META_DATA (name TEXT, value TEXT);"
           "INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_SCHEMA_VERSION', '2.9.1')"),
      "holds ids into StringIds, but the file has no StringIds table (export schema 2.9.1");
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM nsys_reports"), 0);
  // An INT column holding text (SQLite's affinity keeps it) needs no StringIds.
  const NsysImport text = import_nsys(
      s, make("int_text.sqlite",
              "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, shortName INT);"
              "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 'k_kernel')"));
  EXPECT_EQ(text.kernels, 1);
}

TEST(Db_NsysImport, InstanceTokensMatchWholeWordsOnly) {
  std::vector<std::string> names = {kAttend, kFull, kMatch};
  std::sort(names.begin(), names.end());
  EXPECT_EQ(find_instance_token(std::string(kAttend) + ":attend", names), kAttend);
  EXPECT_EQ(find_instance_token("mactune/" + std::string(kFull), names), kFull);
  EXPECT_EQ(find_instance_token("x" + std::string(kAttend), names), "");
  EXPECT_EQ(find_instance_token(std::string(kAttend) + "x:attend", names), "");
  EXPECT_EQ(find_instance_token("", names), "");
}

}  // namespace
}  // namespace mactune::db
