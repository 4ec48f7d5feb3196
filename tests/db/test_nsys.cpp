// nsys import on small synthetic SQLite files with the columns of `nsys export --type sqlite`
// (see docs/database.md): names through StringIds, registered NVTX strings, domains, launch
// attribution through the runtime table, idempotence and the error cases.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "db/merge.h"
#include "db/nsys.h"
#include "tests/db/fixtures.h"

namespace mactune::db {
namespace {

using testing::TempDir;

constexpr const char* kAttend = "attend_cuda_hd128_g4_t64_s2_bf16";
constexpr const char* kMatch = "match_cuda_hd128_k512_bf16";
constexpr const char* kFull = "full_cuda_hd128_g4_bf16";

constexpr std::int64_t kPid = 4242;
constexpr std::int64_t kTid = 4243, kTid2 = 4250;
constexpr std::int64_t global_tid(std::int64_t pid, std::int64_t tid) {
  return (pid << 24) | tid;
}
const std::int64_t kT = global_tid(kPid, kTid), kT2 = global_tid(kPid, kTid2);
const std::int64_t kGlobalPid = kPid << 24;

constexpr const char* kNsysTables = R"sql(
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
  shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
  registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
  gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
  dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
  localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER,
  graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
  eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
  returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
  int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
  floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.11.1');
INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1764435187000000000, '', '');
)sql";

class Report {
 public:
  explicit Report(const std::string& path) : c_(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) {}
  void exec(const std::string& sql) { c_.exec(sql); }
  std::int64_t string_id(const std::string& s) {
    auto q = c_.prepare("INSERT INTO StringIds (value) VALUES (?1)");
    q.bind(1, s).run();
    return c_.last_insert_rowid();
  }
  // An NVTX event; `registered` stores the name through textId with text NULL.
  void nvtx(int type, std::int64_t start, std::optional<std::int64_t> end, const std::string& name,
            std::int64_t gtid, bool registered = false, std::int64_t domain = 0) {
    auto q = c_.prepare(
        "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId, domainId)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    q.bind(1, start).bind(2, end).bind(3, type);
    if (registered)
      q.bind_null(4).bind(6, string_id(name));
    else
      q.bind(4, name).bind_null(6);
    q.bind(5, gtid).bind(7, domain).run();
  }
  // A kernel with its launching runtime call (at `launch` on thread `gtid`, when given).
  void kernel(const std::string& name, std::int64_t start, std::int64_t correlation,
              std::optional<std::int64_t> launch, std::int64_t gtid = 0) {
    const std::int64_t sid = string_id(name);
    auto q = c_.prepare(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?1, ?2, 0, 1, 7, ?3, ?4, ?5, ?5, NULL,"
        " 0, 0, 96, 132, 8, 1, 128, 1, 1, 0, 49152, 0, 0, 1, 49152, NULL, 0)");
    q.bind(1, start).bind(2, start + 250).bind(3, correlation).bind(4, kGlobalPid);
    q.bind(5, sid).run();
    if (!launch) return;
    auto r = c_.prepare(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?1, ?2, 1, ?3, ?4, 0, 0, NULL)");
    r.bind(1, *launch).bind(2, *launch + 5).bind(3, gtid).bind(4, correlation).run();
  }

 private:
  Connection c_;
};

// One decode step on thread T (and one attend launch on T2) under nested NVTX ranges.
void write_report(const std::string& path) {
  Report r(path);
  r.exec(kNsysTables);
  r.nvtx(75, 0, std::nullopt, "mactune", kT, false, 1);  // domain create
  r.nvtx(33, 0, std::nullopt, "category", kT);           // skipped
  r.nvtx(60, 50, 20000, "step 3", kT, false, 1);
  r.nvtx(59, 100, 10000, "tuner point b=4 ctx=32768", kT, false, 1);
  r.nvtx(59, 200, 900, std::string(kMatch) + ":match", kT, true, 1);
  r.nvtx(59, 1000, 2000, std::string(kAttend) + ":attend", kT, true, 1);
  r.nvtx(59, 1100, 1200, "plan", kT, false, 1);
  r.nvtx(34, 5000, std::nullopt, "checkpoint", kT);
  r.nvtx(59, 0, 100000, std::string(kAttend) + ":attend", kT2, true, 1);
  r.kernel("void mactune::cuda::match_kernel<MatchConfig<128, 512>>(Params)", 400, 11, 300, kT);
  r.kernel("void mactune::cuda::attend_kernel<AttendConfig<128, 4, 64, 2>>(Params)", 1300, 12, 1150,
           kT);
  r.kernel(std::string("void ") + kFull + "(Params)", 5100, 13, 5000, kT);
  r.kernel("void other_kernel()", 15100, 14, 15000, kT);
  r.kernel("void lost_kernel()", 16000, 99, std::nullopt);
  r.kernel("void mactune::cuda::attend_kernel<AttendConfig<128, 4, 64, 2>>(Params)", 600, 17, 500,
           kT2);
}

Store store_with_instances(const std::string& path) {
  Store s = Store::open(path);
  s.upsert_instance({kAttend, "cuda", "attend", "hd=128,g=4,t=64,s=2,kv=bf16"});
  s.upsert_instance({kMatch, "cuda", "match", "hd=128,k=512,kv=bf16"});
  s.upsert_instance({kFull, "cuda", "full", "hd=128,g=4,kv=bf16"});
  return s;
}

struct KernelRow {
  std::string instance, range;
  std::int64_t duration, pid, tid;
};

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

TEST(Db_NsysImport, KernelsAndRangesLinkedByNameAndLaunch) {
  TempDir dir;
  write_report(dir.file("report.sqlite"));
  Store s = store_with_instances(dir.file("a.db"));
  const NsysImport r = import_nsys(s, dir.file("report.sqlite"));
  EXPECT_FALSE(r.already_imported);
  EXPECT_EQ(r.export_schema, "3.11.1");
  EXPECT_EQ(r.kernels, 6);
  EXPECT_EQ(r.ranges, 7);  // 6 ranges + 1 mark; domain and category events skipped
  EXPECT_EQ(r.ranges_linked, 3);
  EXPECT_EQ(r.kernels_linked, 4);
  EXPECT_EQ(r.kernels_in_ranges, 5);
  EXPECT_TRUE(r.notes.empty());

  const auto k = kernels_by_name(s);
  ASSERT_EQ(k.size(), 6u);
  const auto& match = k.at("void mactune::cuda::match_kernel<MatchConfig<128, 512>>(Params)");
  EXPECT_EQ(match.instance, kMatch);
  EXPECT_EQ(match.range, std::string(kMatch) + ":match");
  EXPECT_EQ(match.duration, 250);
  EXPECT_EQ(match.pid, kPid);
  EXPECT_EQ(match.tid, kTid);
  // Launched inside "plan" inside the attend range: innermost is "plan", the instance is
  // the nearest enclosing range that names one.
  const auto& attend =
      k.at("void mactune::cuda::attend_kernel<AttendConfig<128, 4, 64, 2>>(Params)");
  EXPECT_EQ(attend.instance, kAttend);
  EXPECT_EQ(attend.range, "plan");
  // Its own name links it; its launch time (5000) falls in the tuner point range.
  const auto& full = k.at(std::string("void ") + kFull + "(Params)");
  EXPECT_EQ(full.instance, kFull);
  EXPECT_EQ(full.range, "tuner point b=4 ctx=32768");
  const auto& other = k.at("void other_kernel()");
  EXPECT_EQ(other.instance, "");
  EXPECT_EQ(other.range, "step 3");  // the start/end range is the only one open at 15000
  const auto& lost = k.at("void lost_kernel()");
  EXPECT_EQ(lost.instance, "");
  EXPECT_EQ(lost.range, "<none>");
  EXPECT_EQ(
      k.at("void mactune::cuda::attend_kernel<AttendConfig<128, 4, 64, 2>>(Params)@T2").instance,
      kAttend);

  auto q = s.connection().prepare(
      "SELECT kind, start_ns, end_ns IS NULL, domain, tid FROM nsys_ranges WHERE name = ?1");
  q.bind(1, std::string(kMatch) + ":match");  // a registered string: text was NULL
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.text(0), "push_pop");
  EXPECT_EQ(q.int64(1), 200);
  EXPECT_EQ(q.int64(2), 0);
  EXPECT_EQ(q.text(3), "mactune");
  EXPECT_EQ(q.int64(4), kTid);
  EXPECT_EQ(s.connection().scalar_int(
                "SELECT COUNT(*) FROM nsys_ranges WHERE kind = 'mark' AND end_ns IS NULL"),
            1);
  EXPECT_EQ(s.connection().scalar_int("SELECT session_start_utc_ns FROM nsys_reports"),
            1764435187000000000);
}

TEST(Db_NsysImport, ReimportAddsNothingMergeKeepsLinks) {
  TempDir dir;
  write_report(dir.file("report.sqlite"));
  {
    Store s = store_with_instances(dir.file("a.db"));
    import_nsys(s, dir.file("report.sqlite"));
    const NsysImport again = import_nsys(s, dir.file("report.sqlite"));
    EXPECT_TRUE(again.already_imported);
    EXPECT_EQ(again.kernels, 6);
    EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM nsys_kernels"), 6);
    EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM nsys_reports"), 1);
  }
  Store b = Store::open(dir.file("b.db"));
  EXPECT_EQ(merge_into(b, dir.file("a.db")).of("nsys_kernels"), 6);
  EXPECT_EQ(merge_into(b, dir.file("a.db")).total(), 0);
  EXPECT_EQ(kernels_by_name(b).at(std::string("void ") + kFull + "(Params)").instance, kFull);
  EXPECT_EQ(b.connection().scalar_int("SELECT COUNT(*) FROM nsys_ranges"), 7);
}

TEST(Db_NsysImport, OlderExportWithTextNamesAndNoRuntimeOrNvtx) {
  TempDir dir;
  {
    Report r(dir.file("old.sqlite"));
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
  EXPECT_EQ(r.notes.size(), 2u);  // no NVTX table, no runtime correlation
  EXPECT_EQ(kernels_by_name(s).at("memset").duration, 5);
}

TEST(Db_NsysImport, BadReportsAreRefusedNamingTheProblem) {
  TempDir dir;
  Store s = store_with_instances(dir.file("a.db"));
  const auto expect_error = [&](const std::string& path, const std::string& needle) {
    try {
      import_nsys(s, path);
      ADD_FAILURE() << "expected an InputError for " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(dir.file("missing.sqlite"), "does not exist");
  {
    std::ofstream f(dir.file("text.sqlite"));
    f << "nsys-rep files are not SQLite; this text is not either. It is long enough.\n";
  }
  expect_error(dir.file("text.sqlite"), "not an SQLite file");
  {
    Report r(dir.file("other.sqlite"));
    r.exec("CREATE TABLE results (x INTEGER)");
  }
  expect_error(dir.file("other.sqlite"), "not an nsys SQLite export");
  {
    Report r(dir.file("no_type.sqlite"));
    r.exec("CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, text TEXT)");
  }
  expect_error(dir.file("no_type.sqlite"), "'eventType'");
  {
    Report r(dir.file("no_name.sqlite"));
    r.exec("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER)");
  }
  expect_error(dir.file("no_name.sqlite"), "neither 'demangledName' nor 'shortName'");
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM nsys_reports"), 0);
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
