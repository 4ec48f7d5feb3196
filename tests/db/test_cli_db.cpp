// `mactune db ...` through the real binary: exit codes, one-line errors, files left intact.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/cli_process.h"
#include "tests/db/fixtures.h"

#ifndef MACTUNE_CLI_BINARY
#error "MACTUNE_CLI_BINARY must name the mactune executable"
#endif

namespace mactune::db {
namespace {

using testing::TempDir;
using testing::test_build;
using testing::test_device;
using testing::test_instance;
using testing::test_stats;
using testing::test_workload;

using test_cli::read_file;
using Result = test_cli::CliResult;

// Runs `mactune args...` with stdout/stderr captured in `dir`; `unprivileged` drops to
// nobody first when running as root (root ignores permission bits).
Result mactune(const TempDir& dir, std::vector<std::string> args, bool unprivileged = false) {
  test_cli::CliOptions o;
  o.unprivileged = unprivileged;
  return test_cli::run_mactune(dir, std::move(args), o);
}

// One shard of a 2 x 4-point grid (points i with i % shards == shard).
void write_shard(const std::string& path, int shard, int shards) {
  Store s = Store::open(path);
  const Id device = s.upsert_device(test_device());
  const Id build = s.upsert_build(test_build());
  const Id run = s.begin_run({.spec_text = "cli",
                              .shard_index = shard,
                              .shard_count = shards,
                              .device_id = device,
                              .build_id = build});
  for (int i = 0; i < 8; ++i) {
    if (i % shards != shard) continue;
    Measurement m;
    m.point = {device,
               build,
               s.upsert_instance(test_instance(i < 4 ? "mac" : "full")),
               "threads=2",
               s.upsert_workload(test_workload(1 << (i % 4), 16384, 0.9)),
               "cpu-wall",
               true};
    m.run_id = run;
    m.stats = test_stats(1e-4 * (i + 1));
    s.record_measurement(m);
  }
  s.finish_run(run, RunStatus::finished);
}

void expect_one_line_error(const Result& r, const std::string& needle) {
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(r.err_lines(), 1) << r.err;
  EXPECT_EQ(r.err.rfind("mactune: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(Db_Cli, MergeInfoExportEndToEnd) {
  TempDir dir;
  write_shard(dir.file("s0.db"), 0, 2);
  write_shard(dir.file("s1.db"), 1, 2);
  Result r =
      mactune(dir, {"db", "merge", dir.file("s0.db"), dir.file("s1.db"), "-o", dir.file("all.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("measurements +8"), std::string::npos) << r.out;
  r = mactune(dir, {"db", "merge", dir.file("s0.db"), dir.file("s1.db"), dir.file("all.db"), "-o",
                    dir.file("all.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("-> " + dir.file("all.db") + ": nothing new"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is the output itself"), std::string::npos) << r.out;

  r = mactune(dir, {"db", "info", "--db", dir.file("all.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("schema    version " + std::to_string(latest_version(builtin_migrations()))),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("measurements 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finished 2"), std::string::npos) << r.out;

  r = mactune(dir,
              {"db", "export", "--db", dir.file("all.db"), "--csv", "-o", dir.file("all.csv")});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream csv(read_file(dir.file("all.csv")));
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 9);  // header + 8 points
  r = mactune(dir, {"db", "export", "--db", dir.file("all.db"), "--table", "runs"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("id,run_key,spec_hash,", 0), 0u) << r.out;
  expect_one_line_error(
      mactune(dir, {"db", "export", "--db", dir.file("all.db"), "--table", "bogus"}),
      "unknown table 'bogus'");
}

TEST(Db_Cli, CorruptFileGivesOneLineExit2AndStaysUntouched) {
  TempDir dir;
  const std::string junk = dir.file("junk.db");
  {
    std::ofstream f(junk, std::ios::binary);
    for (int i = 0; i < 8192; ++i) f.put(static_cast<char>((i * 31 + 7) & 0xff));
  }
  const std::string before = read_file(junk);
  write_shard(dir.file("good.db"), 0, 1);
  expect_one_line_error(mactune(dir, {"db", "info", "--db", junk}), junk);
  expect_one_line_error(mactune(dir, {"db", "export", "--db", junk}), junk);
  expect_one_line_error(mactune(dir, {"db", "merge", dir.file("good.db"), "-o", junk}), junk);
  expect_one_line_error(mactune(dir, {"db", "merge", junk, "-o", dir.file("new.db")}), junk);
  EXPECT_FALSE(std::filesystem::exists(dir.file("new.db")));  // inputs checked first
  // The report is checked before --db is opened (a mactune database is no nsys export).
  expect_one_line_error(mactune(dir, {"db", "import-nsys", dir.file("good.db"), "--db", junk}),
                        "is not an nsys SQLite export");
  EXPECT_TRUE(read_file(junk) == before) << "the corrupt file was modified";
  expect_one_line_error(mactune(dir, {"db", "info", "--db", dir.file("none.db")}),
                        "does not exist");
}

TEST(Db_Cli, ReadOnlyFileGivesOneLineExit2AndStaysReadable) {
  TempDir dir;
  write_shard(dir.file("ro.db"), 0, 1);
  write_shard(dir.file("other.db"), 0, 1);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.file("ro.db").c_str(), 0444), 0);
  ASSERT_EQ(chmod(dir.file("other.db").c_str(), 0444), 0);
  // The captured stdout/stderr files must be writable by the unprivileged child.
  for (const char* f : {"stdout.txt", "stderr.txt"}) {
    std::ofstream(dir.file(f)).put('\n');
    ASSERT_EQ(chmod(dir.file(f).c_str(), 0666), 0);
  }
  const std::string before = read_file(dir.file("ro.db"));
  expect_one_line_error(
      mactune(dir, {"db", "merge", dir.file("other.db"), "-o", dir.file("ro.db")}, true),
      "is read-only");
  expect_one_line_error(
      mactune(dir, {"db", "import-nsys", dir.file("other.db"), "--db", dir.file("ro.db")}, true),
      "is not an nsys SQLite export");  // the report is checked before --db is opened
  const Result info = mactune(dir, {"db", "info", "--db", dir.file("ro.db")}, true);
  EXPECT_EQ(info.rc, 0) << info.err;
  EXPECT_NE(info.out.find("measurements 8"), std::string::npos) << info.out;
  EXPECT_TRUE(read_file(dir.file("ro.db")) == before) << "the read-only file was modified";
}

// Files a command must not leave beside the databases of `dir`.
std::vector<std::string> debris(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find("-wal") != std::string::npos || name.find("-shm") != std::string::npos ||
        name.find(".tmp") != std::string::npos)
      out.push_back(name);
  }
  return out;
}

// Keeps the first page (the schema) and overwrites the rest: every table is damaged.
void damage_tables(const std::string& path) {
  std::string bytes = read_file(path);
  ASSERT_GT(bytes.size(), 4u * 4096);
  for (std::size_t i = bytes.size() / 2; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Db_Cli, DamagedFileIsNamedAsCorruptInOneLineAndReadersLeaveNoFiles) {
  TempDir dir;
  write_shard(dir.file("good.db"), 0, 1);
  Result r = mactune(dir, {"db", "info", "--db", "good.db"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = mactune(dir, {"db", "export", "--db", "good.db"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(debris(dir.path()).empty()) << "a reader left " << debris(dir.path()).front();

  write_shard(dir.file("bad.db"), 0, 1);
  damage_tables(dir.file("bad.db"));
  const std::string before = read_file(dir.file("bad.db"));
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"db", "info", "--db", "bad.db"},
        {"db", "export", "--db", "bad.db"},
        {"report", "--db", "bad.db", "-o", "rep"}}) {
    r = mactune(dir, cmd);
    expect_one_line_error(r, "bad.db");
    EXPECT_NE(r.err.find("corrupt"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("SELECT"), std::string::npos) << "SQL in the message: " << r.err;
    EXPECT_TRUE(debris(dir.path()).empty()) << cmd[1] << " left " << debris(dir.path()).front();
  }
  EXPECT_TRUE(read_file(dir.file("bad.db")) == before) << "the damaged file was modified";

  // merge checks every input before it creates the output.
  r = mactune(dir, {"db", "merge", "good.db", "bad.db", "-o", "out.db"});
  expect_one_line_error(r, "bad.db' is corrupt");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.db")));
  EXPECT_TRUE(debris(dir.path()).empty()) << debris(dir.path()).front();
}

TEST(Db_Cli, MergeReadsInputsInAReadOnlyFolder) {
  TempDir dir;
  const std::string ro = dir.file("ro"), w = dir.file("w");
  std::filesystem::create_directory(ro);
  std::filesystem::create_directory(w);
  write_shard(ro + "/s0.db", 0, 2);
  write_shard(ro + "/s1.db", 1, 2);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  for (const char* f : {"/s0.db", "/s1.db"}) ASSERT_EQ(chmod((ro + f).c_str(), 0444), 0);
  ASSERT_EQ(chmod(ro.c_str(), 0555), 0);
  ASSERT_EQ(chmod(w.c_str(), 0777), 0);
  const Result r =
      mactune(dir, {"db", "merge", ro + "/s0.db", ro + "/s1.db", "-o", w + "/all.db"}, true);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("measurements +8"), std::string::npos) << r.out;
  EXPECT_TRUE(debris(ro).empty()) << debris(ro).front();
  EXPECT_TRUE(debris(w).empty()) << debris(w).front();
  ASSERT_EQ(chmod(ro.c_str(), 0755), 0);
}

TEST(Db_Cli, LockHeldPastTheTimeoutIsOneLineNamingTheFile) {
  TempDir dir;
  write_shard(dir.file("s0.db"), 0, 2);
  write_shard(dir.file("out.db"), 1, 2);
  Connection holder(file_uri(dir.file("out.db")), SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI);
  holder.exec("BEGIN IMMEDIATE");
  setenv("MACTUNE_DB_TIMEOUT", "0.3", 1);
  const Result r = mactune(dir, {"db", "merge", "s0.db", "-o", "out.db"});
  unsetenv("MACTUNE_DB_TIMEOUT");
  expect_one_line_error(r, "mactune: error: out.db: locked by another process for over 0.3 s");
  EXPECT_EQ(r.err.find("BEGIN"), std::string::npos) << r.err;
  holder.exec("COMMIT");
  const Result again = mactune(dir, {"db", "merge", "s0.db", "-o", "out.db"});
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find("measurements +4"), std::string::npos) << again.out;
}

TEST(Db_Cli, ImportNsysReportsCountsAndIsIdempotent) {
  TempDir dir;
  {
    Store s = Store::open(dir.file("a.db"));
    s.upsert_instance(InstanceDesc::named("attend_cuda_hd128_g4_t64_s2_bf16", Backend::cuda,
                                          Family::attend, "t=64"));
  }
  {
    Connection c(dir.file("r.sqlite"), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    c.exec(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
        "INSERT INTO StringIds VALUES (1, 'attend_cuda_hd128_g4_t64_s2_bf16'), (2, 'memcpy');"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER,"
        " demangledName INTEGER, shortName INTEGER);"
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 9, 1, 1), (10, 12, 2, 2);");
  }
  Result r = mactune(dir, {"db", "import-nsys", dir.file("r.sqlite"), "--db", dir.file("a.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("2 kernels (1 linked to instances"), std::string::npos) << r.out;
  r = mactune(dir, {"db", "import-nsys", dir.file("r.sqlite"), "--db", dir.file("a.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("already imported"), std::string::npos) << r.out;
}

TEST(Db_Cli, NsysImportAndSummaryOfARealExport) {
  TempDir dir;
  const std::string report =
      std::string(MACTUNE_TEST_DATA_DIR) + "/saxpy-mpi-cuda-perlmutter.sqlite";
  Result r = mactune(dir, {"db", "import-nsys", report, "--db", dir.file("a.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(
      r.out.find("5 kernels (0 linked to instances, 5 inside NVTX ranges), 15 memcpy/memset,"
                 " 22 NVTX ranges and marks (0 linked), nsys 2022.2.1.31, export schema 2.9.1"),
      std::string::npos)
      << r.out;
  r = mactune(dir, {"db", "import-nsys", report, "--db", dir.file("a.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("already imported"), std::string::npos) << r.out;

  r = mactune(dir, {"nsys", "summary", report, "--db", dir.file("a.db")});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("  saxpy: 100.0% saxpy x5"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("double *"), std::string::npos) << "base names by default:\n" << r.out;
  r = mactune(dir, {"nsys", "summary", report, "--full-names"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("saxpy(double *, double *, double *, double, int)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("memcpy Host-to-Device"), std::string::npos) << r.out;
  r = mactune(dir, {"nsys", "summary", report, "--json", "--range", "saxpy"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\"range_pattern\": \"saxpy\""), std::string::npos) << r.out;
  r = mactune(dir, {"nsys", "summary", report, "--markdown", "--top", "3"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("| --- |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("more rows"), std::string::npos) << r.out;

  expect_one_line_error(mactune(dir, {"nsys", "summary", dir.file("none.sqlite")}),
                        "does not exist");
  expect_one_line_error(mactune(dir, {"nsys", "summary", report, "--db", dir.file("no.db")}),
                        "does not exist");
  {
    std::ofstream f(dir.file("text.sqlite"));
    f << "this is not an SQLite file, and it is long enough to be read as one.\n";
  }
  expect_one_line_error(mactune(dir, {"nsys", "summary", dir.file("text.sqlite")}),
                        "not an SQLite file");
}

}  // namespace
}  // namespace mactune::db
