// `nsys summary` statistics: on a profile whose every number is known by construction (gaps,
// busy time, shares, tune points and their bandwidth), and on the real saxpy export against
// plain SQL over the file.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

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
constexpr const char* kFull = "full_cuda_hd128_g4_bf16";
constexpr std::int64_t kPid = 100, kT = 101, kT2 = 102;
const std::string kA = std::string("void attend_kernel<") + kAttend + ">(Params)";
const std::string kB = "void merge_kernel()";
const std::string kC = std::string("void ") + kFull + "(Params)";
const std::string kTune = "tune hd128_q8_kv2_bf16_b4_c32768 b=4 ctx=32768 hit=0.9 K=512 r=256";

// Two "step" ranges inside a tuner range: step 1 launches A, A, B running back to back but
// for gaps of 100 and 50 ns, step 2 A then B with no gap; C after the steps; D launched by no
// API call; A once more on a second thread inside "warmup"; a 1 MiB copy of 250 ns in step 1.
testing::SynthProfile known_profile() {
  testing::SynthProfile p;
  const auto range = [&](SynthRange::Kind k, std::int64_t s, std::optional<std::int64_t> e,
                         const std::string& name, std::int64_t tid) {
    p.ranges.push_back({k, s, e, name, kPid, tid, 1, k == SynthRange::push_pop});
  };
  range(SynthRange::domain_create, 0, {}, "mactune", kT);
  range(SynthRange::push_pop, 0, 100000, kTune, kT);
  range(SynthRange::push_pop, 1000, 5000, "step", kT);
  range(SynthRange::push_pop, 6000, 9000, "step", kT);
  range(SynthRange::push_pop, 0, 100000, "warmup", kT2);
  range(SynthRange::mark, 4000, {}, "checkpoint", kT);
  std::int64_t corr = 1;
  const auto kernel = [&](const std::string& name, std::int64_t start, std::int64_t ns,
                          std::optional<std::int64_t> launch, std::int64_t tid = kT) {
    p.ops.push_back({SynthOp::kernel, start, start + ns, name, kPid, corr++, launch, tid});
  };
  kernel(kA, 2000, 300, 1100);
  kernel(kA, 2400, 300, 1200);
  kernel(kB, 2750, 300, 1300);
  kernel(kA, 7000, 300, 6100);
  kernel(kB, 7300, 300, 6200);
  kernel(kC, 9600, 100, 9500);
  kernel("void d_kernel()", 20000, 100, std::nullopt);
  kernel(kA, 30000, 300, 29000, kT2);
  SynthOp copy{SynthOp::memcpy, 1500, 1750, "", kPid, corr++, 1050, kT};
  copy.bytes = 1 << 20;
  p.ops.push_back(copy);
  return p;
}

// Tune points: the attend instance at two workloads (different modeled bytes), full at one.
void write_tune_db(const std::string& path) {
  Store s = Store::open(path);
  const Id device = s.upsert_device(testing::test_device());
  const Id build = s.upsert_build(testing::test_build());
  const auto point = [&](const char* instance, const char* family, int batch, double bytes,
                         double median_s) {
    Measurement m;
    m.point = {device,
               build,
               s.upsert_instance(InstanceDesc::named(instance, Backend::cuda,
                                                     parse_enum<Family>(family), "hd=128")),
               "",
               s.upsert_workload(testing::test_workload(batch, 32768, 0.9)),
               "cuda-event",
               true};
    m.stats = testing::test_stats(median_s);
    m.modeled_bytes = bytes;
    s.record_measurement(m);
  };
  point(kAttend, "attend", 4, 3e6, 1e-5);
  point(kAttend, "attend", 8, 6e6, 2e-5);
  point(kFull, "full", 4, 9e6, 3e-5);
}

template <class Rows>
const auto& row_named(const Rows& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.name == name) return r;
  ADD_FAILURE() << "no row " << name;
  return rows.front();
}

TEST(Db_NsysSummary, DurationStatsInterpolateLikeNumpy) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  const DurationStats d = duration_stats(v);
  EXPECT_EQ(d.count, 100);
  EXPECT_DOUBLE_EQ(d.total_ns, 5050);
  EXPECT_DOUBLE_EQ(d.mean_ns, 50.5);
  EXPECT_DOUBLE_EQ(d.p50_ns, 50.5);
  EXPECT_DOUBLE_EQ(d.p99_ns, 99.01);
  EXPECT_DOUBLE_EQ(d.min_ns, 1);
  EXPECT_DOUBLE_EQ(d.max_ns, 100);
  EXPECT_EQ(duration_stats({}).count, 0);
  EXPECT_DOUBLE_EQ(duration_stats({7}).p99_ns, 7);
}

TEST(Db_NsysSummary, KnownProfileEveryNumber) {
  TempDir dir;
  testing::write_export(dir.file("r.sqlite"), ExportSchema::v3_16, known_profile());
  write_tune_db(dir.file("tune.db"));
  const Store tune = Store::open(dir.file("tune.db"), {.mode = OpenMode::read_only});
  const NsysSummary s = summarize_nsys_report(dir.file("r.sqlite"), {.tune_db = &tune});

  EXPECT_EQ(s.nsys_version, "2024.6.2.225");
  EXPECT_EQ(s.export_schema, "3.16.1");
  EXPECT_EQ(s.gpus, "0: NVIDIA H200");
  EXPECT_EQ(s.kernels, 8);
  EXPECT_EQ(s.memops, 1);
  EXPECT_EQ(s.ranges, 4);
  EXPECT_EQ(s.marks, 1);
  EXPECT_EQ(s.kernels_in_ranges, 7);
  EXPECT_EQ(s.domains, std::vector<std::string>{"mactune"});
  EXPECT_DOUBLE_EQ(s.kernel_ns, 2000);
  EXPECT_DOUBLE_EQ(s.memop_ns, 250);
  EXPECT_EQ(s.first_gpu_ns, 1500);
  EXPECT_EQ(s.last_gpu_ns, 30300);
  EXPECT_DOUBLE_EQ(s.gpu_busy_ns, 2250);  // kernels 7300-7600 touch 7000-7300: no double count

  ASSERT_EQ(s.kernel_rows.size(), 4u);  // A (linked, on both threads), B, C (linked), D
  EXPECT_EQ(s.kernel_rows[0].name, kA);
  EXPECT_EQ(s.kernel_rows[0].instance, kAttend);
  EXPECT_EQ(s.kernel_rows[0].time.count, 4);
  EXPECT_DOUBLE_EQ(s.kernel_rows[0].share, 0.6);
  EXPECT_DOUBLE_EQ(row_named(s.kernel_rows, kB).time.total_ns, 600);
  EXPECT_EQ(row_named(s.kernel_rows, kC).instance, kFull);

  // A inside the tuner range: its workload is named, one tune point matches; A on the second
  // thread names none, and the instance has two with different bytes.
  ASSERT_EQ(s.instance_rows.size(), 3u);
  const auto& a = s.instance_rows[0];
  EXPECT_EQ(a.instance, kAttend);
  EXPECT_EQ(a.family, "attend");
  EXPECT_EQ(a.workload, "b=4 ctx=32768 hit=0.9 K=512 r=256");
  EXPECT_EQ(a.time.count, 3);
  EXPECT_DOUBLE_EQ(a.time.mean_ns, 300);
  ASSERT_TRUE(a.tune_point) << a.no_tune_point;
  EXPECT_DOUBLE_EQ(a.tune_point->modeled_bytes, 3e6);
  EXPECT_EQ(a.tune_point->measurements, 1);
  EXPECT_DOUBLE_EQ(*a.achieved_gb_per_s(), 3e6 / 300.0);
  EXPECT_DOUBLE_EQ(*a.tuned_gb_per_s(), 3e6 / 1e-5 / 1e9);
  const auto& bare = s.instance_rows[1];
  EXPECT_EQ(bare.instance, kAttend);
  EXPECT_EQ(bare.workload, "");
  EXPECT_FALSE(bare.tune_point);
  EXPECT_NE(bare.no_tune_point.find("2 measurements"), std::string::npos) << bare.no_tune_point;
  const auto& full = s.instance_rows[2];
  EXPECT_EQ(full.instance, kFull);
  ASSERT_TRUE(full.tune_point) << full.no_tune_point;
  EXPECT_DOUBLE_EQ(*full.achieved_gb_per_s(), 9e6 / 100.0);

  ASSERT_EQ(s.memop_rows.size(), 1u);
  EXPECT_EQ(s.memop_rows[0].kind, "memcpy Host-to-Device");
  EXPECT_EQ(s.memop_rows[0].bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(s.memop_rows[0].gb_per_s(), double(1 << 20) / 250.0);

  // The tuner range holds every kernel its thread launched; the two steps their five.
  const auto& tr = row_named(s.range_rows, kTune);
  EXPECT_EQ(tr.kernels, 6);
  EXPECT_DOUBLE_EQ(tr.wall.total_ns, 100000);
  const auto& step = row_named(s.range_rows, "step");
  EXPECT_EQ(step.domain, "mactune");
  EXPECT_EQ(step.instances, 2);
  EXPECT_DOUBLE_EQ(step.wall.total_ns, 7000);
  EXPECT_DOUBLE_EQ(step.wall.p50_ns, 3500);
  EXPECT_EQ(step.kernels, 5);
  EXPECT_DOUBLE_EQ(step.kernel_ns, 1500);
  EXPECT_DOUBLE_EQ(step.gpu_span_ns, 1050 + 600);
  EXPECT_DOUBLE_EQ(step.gpu_busy_ns, 1500);
  EXPECT_EQ(step.gaps.count, 3);  // 100 and 50 in step 1, 0 in step 2
  EXPECT_DOUBLE_EQ(step.gaps.total_ns, 150);
  EXPECT_DOUBLE_EQ(step.gaps.p50_ns, 50);
  EXPECT_DOUBLE_EQ(step.launch_latency.p50_ns, 1100);  // of 900, 1200, 1450, 900, 1100
  ASSERT_EQ(step.kernels_inside.size(), 2u);
  EXPECT_EQ(step.kernels_inside[0].name, kA);
  EXPECT_EQ(step.kernels_inside[0].count, 3);
  EXPECT_DOUBLE_EQ(step.kernels_inside[0].share, 0.6);
  EXPECT_EQ(row_named(s.range_rows, "warmup").kernels, 1);
  EXPECT_EQ(s.range_rows[0].name, kTune);  // by total wall time (ties: by kernel time)

  // A workload named by the caller resolves the kernel no range names; ranges still win.
  const NsysSummary named =
      summarize_nsys_report(dir.file("r.sqlite"), {.tune_db = &tune, .workload = "b=8 ctx=32768"});
  ASSERT_EQ(named.instance_rows.size(), 3u);
  EXPECT_EQ(named.instance_rows[0].workload, "b=4 ctx=32768 hit=0.9 K=512 r=256");
  EXPECT_EQ(named.instance_rows[1].workload, "b=8 ctx=32768");
  ASSERT_TRUE(named.instance_rows[1].tune_point) << named.instance_rows[1].no_tune_point;
  EXPECT_DOUBLE_EQ(named.instance_rows[1].tune_point->modeled_bytes, 6e6);

  // JSON carries the same numbers.
  const auto j = nlohmann::json::parse(nsys_summary_json(s));
  EXPECT_EQ(j["totals"]["kernels"], 8);
  EXPECT_EQ(j["instances"][0]["tune_point"]["modeled_bytes"], 3e6);
  EXPECT_EQ(j["ranges"].size(), 3u);
  EXPECT_EQ(j["kernels"][0]["name"], kA);
  EXPECT_TRUE(j["instances"][1]["tune_point"].is_null());
}

TEST(Db_NsysSummary, RangePatternKeepsTheRangesAndWhatTheyLaunched) {
  TempDir dir;
  testing::write_export(dir.file("r.sqlite"), ExportSchema::real_2_9_1, known_profile());
  for (const std::string pattern : {"step", "st?p@mactune", "s*"}) {
    const NsysSummary s = summarize_nsys_report(dir.file("r.sqlite"), {.range_pattern = pattern});
    EXPECT_EQ(s.ranges, 2) << pattern;
    EXPECT_EQ(s.kernels, 5) << pattern;
    EXPECT_EQ(s.memops, 1) << pattern;
    EXPECT_DOUBLE_EQ(s.kernel_ns, 1500) << pattern;
    ASSERT_EQ(s.range_rows.size(), 1u) << pattern;
    EXPECT_TRUE(s.instance_rows.empty());  // no tuner database: nothing to link to
  }
  const NsysSummary none = summarize_nsys_report(dir.file("r.sqlite"), {.range_pattern = "x*"});
  EXPECT_EQ(none.ranges + none.kernels + none.memops, 0);
}

TEST(Db_NsysSummary, ScratchDatabaseIsRemoved) {
  TempDir dir, tmp;
  testing::write_export(dir.file("r.sqlite"), ExportSchema::v3_16, known_profile());
  const char* old = getenv("TMPDIR");
  const std::string saved = old ? old : "";
  setenv("TMPDIR", tmp.path().c_str(), 1);
  summarize_nsys_report(dir.file("r.sqlite"), {});
  EXPECT_THROW(summarize_nsys_report(dir.file("missing.sqlite"), {}), InputError);
  old ? setenv("TMPDIR", saved.c_str(), 1) : unsetenv("TMPDIR");
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

TEST(Db_NsysSummary, RealSaxpyExport) {
  const NsysSummary s = summarize_nsys_report(testing::real_export_path(), {});
  const Connection src(file_uri(testing::real_export_path(), "immutable=1"),
                       SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  const double kernel_ns =
      double(src.scalar_int("SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
  EXPECT_EQ(s.kernels, 5);
  EXPECT_EQ(s.kernels_in_ranges, 5);
  EXPECT_EQ(s.memops, 15);
  EXPECT_EQ(s.ranges, 22);
  EXPECT_EQ(s.domains, (std::vector<std::string>{"", "MPI"}));
  EXPECT_DOUBLE_EQ(s.kernel_ns, kernel_ns);
  ASSERT_EQ(s.kernel_rows.size(), 1u);
  EXPECT_EQ(s.kernel_rows[0].name, "saxpy(double *, double *, double *, double, int)");
  EXPECT_DOUBLE_EQ(s.kernel_rows[0].share, 1.0);
  EXPECT_EQ(s.kernel_rows[0].launch, "2x1x1 x 512x1x1");
  ASSERT_EQ(s.memop_rows.size(), 2u);
  EXPECT_EQ(s.memop_rows[0].kind, "memcpy Host-to-Device");
  EXPECT_EQ(s.memop_rows[0].time.count, 10);
  EXPECT_EQ(s.memop_rows[0].bytes, 10LL * 262144000);
  EXPECT_EQ(s.memop_rows[1].kind, "memcpy Device-to-Host");
  const auto& saxpy = row_named(s.range_rows, "saxpy");
  EXPECT_EQ(saxpy.domain, "");
  EXPECT_EQ(saxpy.instances, 5);
  EXPECT_EQ(saxpy.kernels, 5);
  EXPECT_DOUBLE_EQ(saxpy.kernel_ns, kernel_ns);
  EXPECT_EQ(saxpy.gaps.count, 0);  // one kernel per range
  EXPECT_EQ(row_named(s.range_rows, "MPI_Send").instances, 10);
  EXPECT_EQ(row_named(s.range_rows, "MPI_Send").kernels, 0);
  EXPECT_DOUBLE_EQ(row_named(s.range_rows, "MPI_Init").wall.total_ns, 710796807.0 - 65117824.0);
  EXPECT_EQ(s.range_rows[0].name, "MPI_Init");

  std::ostringstream text, md;
  print_nsys_summary(text, s, NsysTableStyle::plain, 20, NsysKernelNames::full);
  print_nsys_summary(md, s, NsysTableStyle::markdown, 20);
  EXPECT_NE(text.str().find("nsys 2022.2.1.31, export schema 2.9.1"), std::string::npos);
  EXPECT_NE(text.str().find("saxpy(double *, double *, double *, double, int)"), std::string::npos);
  EXPECT_NE(md.str().find("| saxpy | (default) | push_pop |"), std::string::npos) << md.str();

  const NsysSummary mpi =
      summarize_nsys_report(testing::real_export_path(), {.range_pattern = "MPI_*@MPI"});
  EXPECT_EQ(mpi.ranges, 17);
  EXPECT_EQ(mpi.kernels, 0);
}

}  // namespace
}  // namespace mactune::db
