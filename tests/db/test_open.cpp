// Opening: ordered migrations (with a fake v2 step), and the files that must be refused with
// an InputError naming them and left byte for byte as they were.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "tests/db/fixtures.h"

namespace mactune::db {
namespace {

using testing::run_unprivileged;
using testing::TempDir;
using testing::test_build;
using testing::test_device;
using testing::test_instance;
using testing::test_stats;
using testing::test_workload;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A database with `n` measurements, closed (its WAL checkpointed into the main file).
void write_db(const std::string& path, int n) {
  Store s = Store::open(path);
  const Id device = s.upsert_device(test_device());
  const Id build = s.upsert_build(test_build());
  const Id instance = s.upsert_instance(test_instance());
  for (int i = 0; i < n; ++i) {
    Measurement m;
    m.point = {device,
               build,
               instance,
               "chunk_tokens=" + std::to_string(64 * (i + 1)),
               s.upsert_workload(test_workload(1 + i % 8, 4096, 0.5)),
               "cpu-wall",
               true};
    m.stats = test_stats(1e-4 * (i + 1));
    m.notes = std::string(300, 'n');
    s.record_measurement(m);
  }
}

// This build's migrations plus one more step (the next version).
const int kNext = latest_version(builtin_migrations()) + 1;
std::vector<Migration> with_next(std::function<void(Connection&)> step) {
  std::vector<Migration> m = builtin_migrations();
  m.push_back({kNext, "test: measurements.gpu_temp_c", std::move(step)});
  return m;
}

void expect_input_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an InputError containing '" << needle << "'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
  }
}

TEST(Db_Migrations, LaterStepAppliesOnceKeepingData) {
  TempDir dir;
  const std::string path = dir.file("a.db");
  write_db(path, 5);
  const auto v2 = with_next(
      [](Connection& c) { c.exec("ALTER TABLE measurements ADD COLUMN gpu_temp_c REAL"); });
  {
    Store s = Store::open(path, {.migrations = &v2});
    EXPECT_EQ(s.schema_version(), kNext);
    EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 5);
    EXPECT_EQ(
        s.connection().scalar_int("SELECT COUNT(*) FROM measurements WHERE gpu_temp_c IS NULL"), 5);
  }
  {  // Opening again applies nothing (ALTER TABLE twice would fail).
    Store s = Store::open(path, {.migrations = &v2});
    EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM schema_version"), kNext);
  }
  // This build refuses the newer file, read-write and read-only.
  expect_input_error([&] { Store::open(path); }, "newer than this mactune");
  expect_input_error([&] { Store::open(path, {.mode = OpenMode::read_only}); }, "newer");
}

TEST(Db_Migrations, FailingStepRollsBackToThePreviousVersion) {
  TempDir dir;
  const std::string path = dir.file("a.db");
  write_db(path, 3);
  const auto bad = with_next([](Connection& c) {
    c.exec("CREATE TABLE half_done (x INTEGER)");
    c.exec("ALTER TABLE no_such_table ADD COLUMN y REAL");
  });
  EXPECT_THROW(Store::open(path, {.migrations = &bad}), SqliteError);
  Store s = Store::open(path);
  EXPECT_EQ(s.schema_version(), kNext - 1);
  EXPECT_FALSE(s.connection().table_exists("half_done"));
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements"), 3);
}

TEST(Db_Migrations, ReadOnlyOpenNeverMigrates) {
  TempDir dir;
  const std::string path = dir.file("a.db");
  write_db(path, 1);
  const auto v2 = with_next([](Connection& c) { c.exec("CREATE TABLE extra_v2 (x INTEGER)"); });
  const std::string before = read_bytes(path);
  expect_input_error([&] { Store::open(path, {.mode = OpenMode::read_only, .migrations = &v2}); },
                     "mactune db migrate");
  EXPECT_TRUE(read_bytes(path) == before) << "file changed: " << path;
}

// A file written before the key formats were recorded (schema v2): its keys spelt as they
// were then, its decisions' MAC settings with the names of then. Opening it brings both to this
// build's field tables, and the points it holds are still found (a resumed sweep measures
// nothing twice). The old file is made from a new one by undoing v3 and what came with it.
TEST(Db_Migrations, FileBeforeKeyFormatsIsRekeyedAndKeepsItsPoints) {
  TempDir dir;
  const std::string path = dir.file("v2.db");
  const Workload w = test_workload(4, 32768, 0.9);
  Id workload = 0;
  {
    Store s = Store::open(path);
    const Id device = s.upsert_device(test_device());
    s.upsert_instance(test_instance("mac"));
    workload = s.upsert_workload(w);
    BestConfig b;
    b.device_id = device;
    b.bucket = Bucket::of(w.problem, w.context);
    b.family = Family::mac;
    b.policy = "steady_clock";
    b.instance = test_instance("mac").name;
    b.params =
        "threads=2;K=512,r=256,tau=0.45,summary=f32,pick=nearest,rectify=forward,eps=1,"
        "min_context=2048";
    b.tie_set = {{b.instance, b.params, 1e-3}};
    s.write_best_config(b);
    s.connection().exec(testing::kUndoV9);
    s.connection().exec(
        "DROP TABLE key_formats; DELETE FROM schema_version WHERE version >= 3;"
        // The view names the columns v4, v5 and v8 added; v1's comes back with v6, v8's after.
        "DROP VIEW measurements_view;"
        "ALTER TABLE measurements DROP COLUMN kv_tokens_read;"
        "ALTER TABLE measurements DROP COLUMN kv_tokens_total;"
        "ALTER TABLE measurements DROP COLUMN samples_s;"
        "ALTER TABLE measurements DROP COLUMN partial;"
        "ALTER TABLE workloads DROP COLUMN subtract_guard;"
        "ALTER TABLE fidelity DROP COLUMN subtract_guard;"
        "UPDATE workloads SET key = 'b=4,ctx=32768,hq=8,hkv=2,d=128,kv=bf16,page=16,hit=0.9,"
        "lag=uniform(256,4096),coh=per-head,K=512,r=256,tau=0.45,pick=nearest,minctx=2048,"
        "sum=f32,rect=forward,eps=1';"
        "UPDATE best_configs SET bucket = 'b=4,ctx=32768,hq=8,hkv=2,d=128'");
  }
  Store s = Store::open(path);
  EXPECT_EQ(s.schema_version(), kNext - 1);
  auto key = s.connection().prepare("SELECT key FROM workloads");
  ASSERT_TRUE(key.step());
  EXPECT_EQ(key.text(0), w.key());
  EXPECT_EQ(s.upsert_workload(w), workload) << "the stored workload is found again";
  const auto best = s.best_configs(s.devices().at(0).id);
  ASSERT_EQ(best.size(), 1u);
  const std::string renamed =
      "threads=2;K=512,r=256,tau=0.45,summary_dtype=f32,pick=nearest,rectify=forward,"
      "accept_eps=1,min_context=2048";
  EXPECT_EQ(best[0].params, renamed);
  ASSERT_EQ(best[0].tie_set.size(), 1u);
  EXPECT_EQ(best[0].tie_set[0].params, renamed);
  auto bucket = s.connection().prepare("SELECT bucket FROM best_configs");
  ASSERT_TRUE(bucket.step());
  EXPECT_EQ(bucket.text(0), decision_key(Bucket::of(w.problem, w.context), std::nullopt, ""));
}

// A file of schema 6 spells the CUDA engine's chunk knob min_chunk in its launch params;
// opening it spells them chunk_tokens everywhere they are stored (measurements, decisions and
// their tie sets, break-even rows), the rest of each text untouched.
TEST(Db_Migrations, CudaMinChunkIsRespeltChunkTokens) {
  TempDir dir;
  const std::string path = dir.file("v6.db");
  const Workload w = test_workload(4, 32768, 0.9);
  const InstanceDesc cuda =
      InstanceDesc::named("mac_cuda_test_hd128_bf16", Backend::cuda, Family::mac, "head_dim=128");
  const std::string launch = "match=auto,merge=auto,min_chunk=256,ctas_per_sm=0,graph=false";
  const std::string first = "min_chunk=64,graph=true;K=512,r=256,min_context=2048";
  Id device = 0;
  {
    Store s = Store::open(path);
    device = s.upsert_device(test_device());
    const Id build = s.upsert_build(test_build());
    const Id instance = s.upsert_instance(cuda);
    Measurement m;
    m.point = {device, build, instance, launch, s.upsert_workload(w), "cuda-event", false};
    m.stats = test_stats(1e-4);
    s.record_measurement(m);
    BestConfig b;
    b.device_id = device;
    b.bucket = Bucket::of(w.problem, w.context);
    b.family = Family::mac;
    b.policy = "cuda-event";
    b.instance = cuda.name;
    b.params = first;
    b.tie_set = {{b.instance, first, 1e-3}, {b.instance, launch + ";K=256", 2e-3}};
    s.write_best_config(b);
    BreakEvenRow e;
    e.device_id = device;
    e.build_id = build;
    e.bucket = b.bucket;
    e.policy = "cuda-event";
    e.mac_instance = e.full_instance = b.instance;
    e.mac_params = launch + ";K=512";
    e.full_params = launch;
    s.write_break_even(e);
    // Undo v9 (the launches and the ids that reference rows), v8 (its view names the columns
    // it added), then v7.
    s.connection().exec(testing::kUndoV9);
    s.connection().exec(
        "DROP VIEW measurements_view;"
        "ALTER TABLE measurements DROP COLUMN kv_tokens_read;"
        "ALTER TABLE measurements DROP COLUMN kv_tokens_total;"
        "DELETE FROM schema_version WHERE version >= 7");
  }
  Store s = Store::open(path);
  EXPECT_EQ(s.schema_version(), latest_version(builtin_migrations()));
  const std::string renamed = "match=auto,merge=auto,chunk_tokens=256,ctas_per_sm=0,graph=false";
  MeasurementFilter f;
  f.device_id = device;
  const auto rows = s.measurements(f);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].m.point.params, renamed);
  const auto best = s.best_configs(device);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].params, "chunk_tokens=64,graph=true;K=512,r=256,min_context=2048");
  ASSERT_EQ(best[0].tie_set.size(), 2u);
  EXPECT_EQ(best[0].tie_set[0].params, best[0].params);
  EXPECT_EQ(best[0].tie_set[1].params, renamed + ";K=256");
  const auto be = s.break_evens(device);
  ASSERT_EQ(be.size(), 1u);
  EXPECT_EQ(be[0].mac_params, renamed + ";K=512");
  EXPECT_EQ(be[0].full_params, renamed);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM measurements WHERE instr(params, "
                                      "'min_chunk') > 0"),
            0);
}

// A setting the file has no column for (a field added to a table since it was written) gets
// one, holding the field's default; a read-only open refuses the file until then.
TEST(Db_Migrations, SettingsColumnsFollowTheFieldTables) {
  TempDir dir;
  const std::string path = dir.file("a.db");
  write_db(path, 2);
  {
    Store s = Store::open(path);
    s.connection().exec("ALTER TABLE workloads DROP COLUMN accept_eps");
    s.connection().exec("UPDATE key_formats SET digest = 'older'");
  }
  expect_input_error([&] { Store::open(path, {.mode = OpenMode::read_only}); },
                     "mactune db migrate");
  Store s = Store::open(path);
  EXPECT_EQ(s.connection().scalar_int("SELECT COUNT(*) FROM workloads WHERE accept_eps = 1"),
            s.connection().scalar_int("SELECT COUNT(*) FROM workloads"));
  EXPECT_EQ(s.upsert_workload(test_workload(1, 4096, 0.5)),
            s.connection().scalar_int("SELECT MIN(id) FROM workloads"));
  Store::open(path, {.mode = OpenMode::read_only});  // up to date now
}

TEST(Db_OpenErrors, NotADatabaseForeignOrMissingIsRefusedUntouched) {
  TempDir dir;
  const std::string junk = dir.file("junk.db");
  {
    std::ofstream f(junk, std::ios::binary);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>((i * 7919) & 0xff));
  }
  const std::string junk_bytes = read_bytes(junk);
  expect_input_error([&] { Store::open(junk); }, "junk.db' is not a usable mactune database");
  expect_input_error([&] { Store::open(junk, {.mode = OpenMode::read_only}); }, "junk.db");
  EXPECT_TRUE(read_bytes(junk) == junk_bytes) << "file changed: " << junk;

  const std::string foreign = dir.file("foreign.db");
  {
    Connection c(foreign, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    c.exec("CREATE TABLE results (x INTEGER); INSERT INTO results VALUES (1)");
  }
  const std::string foreign_bytes = read_bytes(foreign);
  expect_input_error([&] { Store::open(foreign); }, "not a mactune one");
  EXPECT_TRUE(read_bytes(foreign) == foreign_bytes) << "file changed: " << foreign;

  expect_input_error([&] { Store::open(dir.file("nope.db"), {.mode = OpenMode::read_only}); },
                     "does not exist");
  expect_input_error([&] { Store::open(dir.file("no/such/dir/a.db")); }, "does not exist");
  expect_input_error([&] { Store::open(dir.path()); }, "is a directory");
}

TEST(Db_OpenErrors, DamagedPagesAreCaughtBeforeAnyWrite) {
  TempDir dir;
  const std::string path = dir.file("a.db");
  write_db(path, 60);  // about 20 KiB of rows: several pages
  std::string bytes = read_bytes(path);
  ASSERT_GT(bytes.size(), 4u * 4096);
  for (std::size_t i = 2 * 4096; i < 3 * 4096; ++i) bytes[i] = static_cast<char>(0xA5);
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << bytes;
  }
  expect_input_error([&] { Store::open(path); }, "is corrupt");
  EXPECT_TRUE(read_bytes(path) == bytes) << "file changed: " << path;

  // A truncated file: shorter than its header says.
  const std::string cut = dir.file("cut.db");
  write_db(cut, 60);
  std::string cut_bytes = read_bytes(cut);
  cut_bytes.resize(cut_bytes.size() / 2);
  {
    std::ofstream f(cut, std::ios::binary | std::ios::trunc);
    f << cut_bytes;
  }
  expect_input_error([&] { Store::open(cut); }, "cut.db");
  EXPECT_TRUE(read_bytes(cut) == cut_bytes) << "file changed: " << cut;
}

TEST(Db_OpenErrors, ReadOnlyFileIsRefusedForWritingAndReadableForReading) {
  TempDir dir;
  const std::string path = dir.file("ro.db");
  write_db(path, 4);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  const std::string before = read_bytes(path);

  const int write_rc = run_unprivileged([&] {
    try {
      Store::open(path);
      return 1;  // opened for writing: wrong
    } catch (const InputError& e) {
      return std::string(e.what()).find("ro.db' is read-only") != std::string::npos ? 0 : 2;
    }
  });
  EXPECT_EQ(write_rc, 0);
  const int read_rc = run_unprivileged([&] {
    Store s = Store::open(path, {.mode = OpenMode::read_only});
    return s.connection().scalar_int("SELECT COUNT(*) FROM measurements") == 4 ? 0 : 3;
  });
  EXPECT_EQ(read_rc, 0);
  EXPECT_TRUE(read_bytes(path) == before) << "file changed: " << path;
}

}  // namespace
}  // namespace mactune::db
