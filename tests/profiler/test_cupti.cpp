// CUPTI record -> trace conversion on hand-filled CUPTI 13.0 activity structs (what the buffer
// callback hands the decoder), and the profiler host API (metric configs for GH100), which CUPTI
// runs without a GPU. Built only with CUPTI.
#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "kernels/error.h"
#include "profiler/activity_trace.h"
#include "profiler/cupti_api.h"
#include "profiler/cupti_records.h"
#include "profiler/dram.h"
#include "profiler/trace_check.h"

namespace mactune::prof {
namespace {

// Records as CUPTI lays them out in a buffer: zeroed, kind set.
template <class Record>
Record record(CUpti_ActivityKind kind) {
  Record r{};
  r.kind = kind;
  return r;
}

const CUpti_Activity* as_activity(const void* r) {
  return static_cast<const CUpti_Activity*>(r);
}

TEST(CuptiRecords, KernelRecordIsDemangledAndKeepsLaunchGeometry) {
  auto k = record<cupti::KernelRecord>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  k.start = 1'000'000;
  k.end = 1'004'000;
  k.deviceId = 0;
  k.contextId = 1;
  k.streamId = 7;
  k.correlationId = 55;
  k.gridX = 132, k.gridY = 2, k.gridZ = 1;
  k.blockX = 128, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 96;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 49152;
  k.name = "_ZN7mactune4cuda6attendILi128ELi4EEEvPKfPf";
  ActivityLog log;
  cupti::RecordDecoder decoder(/*clock_offset_ns=*/-500'000);
  EXPECT_TRUE(decoder.decode(as_activity(&k), log));
  ASSERT_EQ(log.device.size(), 1u);
  const DeviceActivity& d = log.device[0];
  EXPECT_EQ(d.op, DeviceOp::kernel);
  EXPECT_EQ(d.name, "void mactune::cuda::attend<128, 4>(float const*, float*)");
  EXPECT_EQ(d.start_ns, 500'000);  // offset applied
  EXPECT_EQ(d.end_ns, 504'000);
  EXPECT_EQ(d.stream, 7u);
  EXPECT_EQ(d.correlation, 55u);
  EXPECT_EQ(d.grid[0], 132);
  EXPECT_EQ(d.grid[1], 2);
  EXPECT_EQ(d.block[0], 128);
  EXPECT_EQ(d.registers_per_thread, 96);
  EXPECT_EQ(d.dynamic_shared_bytes, 49152);
}

TEST(CuptiRecords, RuntimeApiNameLosesItsVersionSuffix) {
  auto a = record<cupti::ApiRecord>(CUPTI_ACTIVITY_KIND_RUNTIME);
  a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  a.start = 10;
  a.end = 20;
  a.threadId = 0x1234;
  a.correlationId = 55;
  ActivityLog log;
  cupti::RecordDecoder decoder;
  decoder.decode(as_activity(&a), log);
  ASSERT_EQ(log.api.size(), 1u);
  EXPECT_EQ(log.api[0].name, "cudaLaunchKernel");
  EXPECT_FALSE(log.api[0].driver);
  EXPECT_EQ(log.api[0].thread, 0x1234u);
  EXPECT_EQ(log.api[0].correlation, 55u);
}

TEST(CuptiRecords, CopiesMemsetsSyncsAndRecordsWithoutTime) {
  auto m = record<cupti::MemcpyRecord>(CUPTI_ACTIVITY_KIND_MEMCPY);
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 1 << 20;
  m.start = 100;
  m.end = 200;
  m.streamId = 3;
  m.correlationId = 9;
  auto s = record<cupti::MemsetRecord>(CUPTI_ACTIVITY_KIND_MEMSET);
  s.bytes = 4096;
  s.start = 300;
  s.end = 310;
  auto y = record<cupti::SyncRecord>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  y.start = 400;
  y.end = 900;
  y.streamId = 3;
  y.correlationId = 12;
  auto unknown = record<cupti::KernelRecord>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  unknown.name = "k";  // start = end = 0: CUPTI_TIMESTAMP_UNKNOWN
  CUpti_ActivityOverhead3 overhead{};
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  ActivityLog log;
  cupti::RecordDecoder decoder;
  for (const void* r : {static_cast<const void*>(&m), static_cast<const void*>(&s),
                        static_cast<const void*>(&y), static_cast<const void*>(&unknown)})
    EXPECT_TRUE(decoder.decode(as_activity(r), log));
  EXPECT_FALSE(decoder.decode(as_activity(&overhead), log));
  ASSERT_EQ(log.device.size(), 2u);
  EXPECT_EQ(log.device[0].name, "Memcpy HtoD");
  EXPECT_EQ(log.device[0].bytes, 1u << 20);
  EXPECT_EQ(log.device[1].op, DeviceOp::memset);
  ASSERT_EQ(log.sync.size(), 1u);
  EXPECT_EQ(log.sync[0].type, "stream synchronize");
  EXPECT_EQ(log.records_without_time, 1u);
  EXPECT_EQ(log.other_records, 1u);
}

TEST(CuptiRecords, LaunchToKernelFlowThroughTheWholeTracePath) {
  cupti::RecordDecoder decoder;
  ActivityLog log;
  for (std::uint32_t i = 0; i < 4; ++i) {
    auto a = record<cupti::ApiRecord>(CUPTI_ACTIVITY_KIND_RUNTIME);
    a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    a.start = 1'000 + 1'000 * i;
    a.end = a.start + 300;
    a.threadId = 77;
    a.correlationId = 100 + i;
    auto k = record<cupti::KernelRecord>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    k.start = a.start + 500;
    k.end = k.start + 400;
    k.streamId = i % 2 ? 13 : 14;
    k.correlationId = a.correlationId;
    k.name = i % 2 ? "_Z5matchPKfPi" : "_Z6attendPKfPf";
    // CUPTI delivers records in no particular order: kernels first.
    decoder.decode(as_activity(&k), log);
    decoder.decode(as_activity(&a), log);
  }
  sort_by_start(log);
  Timeline tl;
  tl.name_process(1, "host", 0);
  ActivityTraceOptions opt;
  opt.host_pid = 1;
  const ActivityTraceCounts n = add_activity(tl, log, opt);
  EXPECT_EQ(n.flows, 4);
  EXPECT_EQ(n.kernels, 4);
  std::ostringstream out;
  write_chrome_trace(out, tl, {});
  const TraceCheck c = check_chrome_trace(out.str());
  EXPECT_TRUE(c.ok()) << c.summary();
  EXPECT_EQ(c.flows, 4);
  EXPECT_EQ(c.tracks, 3);  // the launching thread and two streams
  bool demangled = false;
  for (const auto& s : tl.spans()) demangled = demangled || s.name == "match(float const*, int*)";
  EXPECT_TRUE(demangled);
}

TEST(CuptiRecords, DemangleLeavesPlainNamesAlone) {
  EXPECT_EQ(cupti::demangle("plain_c_kernel"), "plain_c_kernel");
  EXPECT_EQ(cupti::demangle("_Z3fooi"), "foo(int)");
  EXPECT_EQ(cupti::demangle(nullptr), "?");
}

TEST(CuptiLibrary, LoadedAtRunTimeNotLinked) {
  std::string why;
  const cupti::Api* api = cupti::api(&why);
  ASSERT_NE(api, nullptr) << why;
  std::uint32_t version = 0;
  ASSERT_EQ(api->GetVersion(&version), CUPTI_SUCCESS);
  EXPECT_GE(version, 130000u);
  EXPECT_EQ(cupti::result_text(CUPTI_ERROR_NOT_INITIALIZED), "CUPTI_ERROR_NOT_INITIALIZED");
}

// ---- Profiler host API: no GPU needed.

TEST(CounterConfig_GH100, DramBytesReadIsOnePass) {
  const auto chips = supported_chips();
  ASSERT_NE(std::find(chips.begin(), chips.end(), "GH100"), chips.end());
  const CounterConfig c("GH100", {"dram__bytes_read.sum"});
  EXPECT_EQ(c.passes(), 1u);
  EXPECT_FALSE(c.image().empty());
  EXPECT_FALSE(c.description("dram__bytes_read.sum").empty());
}

TEST(CounterConfig_GH100, DefaultDramMetricsFitOnePass) {
  const CounterConfig c("GH100", default_dram_metrics());
  EXPECT_EQ(c.passes(), 1u);
  EXPECT_EQ(c.metrics(), default_dram_metrics());
}

TEST(CounterConfig_GH100, ManyThroughputMetricsNeedMorePasses) {
  const CounterConfig c(
      "GH100", {"dram__bytes_read.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"});
  EXPECT_GT(c.passes(), 1u);
}

TEST(CounterConfig_GH100, UnknownMetricIsNamed) {
  try {
    CounterConfig c("GH100", {"dram__bytes_read.sum", "lts__t_bytes_srcunit_tex_op_read.sum"});
    FAIL() << "an unknown metric was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("lts__t_bytes_srcunit_tex_op_read.sum"), std::string::npos)
        << e.what();
  }
  // The check runs before anything reaches CUPTI: a good config still builds afterwards.
  EXPECT_EQ(CounterConfig("GH100", {"dram__bytes_write.sum"}).passes(), 1u);
}

TEST(CounterConfig_GH100, UnknownChipIsNamed) {
  try {
    CounterConfig c("GX999", {"dram__bytes_read.sum"});
    FAIL() << "an unknown chip was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("GX999"), std::string::npos) << e.what();
  }
}

TEST(DramComparison, RatiosAndL2Sectors) {
  CounterResult r;
  r.metrics = default_dram_metrics();
  r.values = {1.1e9, 2.0e6, 3.0e7};
  const DramComparison c = compare_dram("mac", r, 1.0e9, 1.0e6);
  EXPECT_DOUBLE_EQ(c.read_ratio(), 1.1);
  EXPECT_DOUBLE_EQ(c.l2_requested, 32.0 * 3.0e7);
  EXPECT_TRUE(std::isnan(r.value("gpu__time_duration.sum")));
}

TEST(RangeCounter, UnavailableWithoutAGpuSaysWhy) {
  std::string why;
  if (cuda_device_usable()) GTEST_SKIP() << "a GPU is usable here: see the gpu-labelled test";
  EXPECT_FALSE(RangeCounter::available(&why));
  EXPECT_FALSE(why.empty());
  EXPECT_THROW(RangeCounter counter, Error);
}

}  // namespace
}  // namespace mactune::prof
