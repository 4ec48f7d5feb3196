// GPU activity on the timeline: kernels on per-stream tracks of a per-device process, API calls
// on the launching host thread's own track, a flow from each launch to what it launched, and
// kernel time per step in the summary. Uses the profiler's own records (no CUPTI needed).
#include <gtest/gtest.h>

#include <sstream>

#include "profiler/activity.h"
#include "profiler/activity_trace.h"
#include "profiler/clock.h"
#include "profiler/cpu_tracer.h"
#include "profiler/summary.h"
#include "profiler/trace_check.h"

namespace mactune::prof {
namespace {

DeviceActivity kernel(const char* name, std::int64_t start, std::int64_t end, std::uint32_t stream,
                      std::uint32_t correlation) {
  DeviceActivity d;
  d.name = name;
  d.start_ns = start;
  d.end_ns = end;
  d.stream = stream;
  d.correlation = correlation;
  d.grid[0] = 132;
  d.block[0] = 128;
  return d;
}

ApiCall launch(std::int64_t start, std::int64_t end, std::uint32_t thread, std::uint32_t corr) {
  return {"cudaLaunchKernel", false, start, end, 1, thread, corr, 0};
}

TEST(ActivityTrace, KernelsStreamsApiCallsAndFlowsValidate) {
  // The host thread traced a step with an attend phase; CUPTI saw its two launches.
  CpuPhaseTracer tracer;
  tracer.register_thread("decode loop");
  const std::uint32_t me = cupti_thread_id();
  const std::int64_t t0 = now_ns();
  ActivityLog log;
  log.api = {launch(t0 + 100, t0 + 200, me, 7),
             launch(t0 + 300, t0 + 400, me, 8),
             {"cudaStreamSynchronize", false, t0 + 500, t0 + 3000, 1, me, 9, 0},
             launch(t0 + 600, t0 + 700, 0xabcdef12u, 10)};  // a thread the tracer never saw
  log.device = {kernel("match_kernel", t0 + 250, t0 + 900, 7, 7),
                kernel("attend_kernel", t0 + 950, t0 + 2900, 7, 8),
                kernel("orphan_kernel", t0 + 1000, t0 + 1100, 13, 99)};
  DeviceActivity copy;
  copy.op = DeviceOp::memcpy;
  copy.name = "Memcpy HtoD";
  copy.start_ns = t0 + 2950;
  copy.end_ns = t0 + 2990;
  copy.stream = 7;
  copy.correlation = 10;
  copy.bytes = 4096;
  log.device.push_back(copy);
  log.sync = {{"stream synchronize", t0 + 510, t0 + 2990, 1, 7, 9}};

  Timeline tl;
  const int pid = 4242;
  tl.name_process(pid, "mactune profile", 0);
  tracer.add_to(tl, pid);
  ActivityTraceOptions opt;
  opt.host_pid = pid;
  opt.host_threads = tracer.threads();
  opt.device_names = {"NVIDIA H200"};
  const ActivityTraceCounts n = add_activity(tl, log, opt);
  EXPECT_EQ(n.kernels, 3);
  EXPECT_EQ(n.copies, 1);
  EXPECT_EQ(n.api_calls, 4);
  EXPECT_EQ(n.syncs, 1);
  EXPECT_EQ(n.flows, 3);                // two launches and the copy
  EXPECT_EQ(n.ops_without_launch, 1);   // the orphan
  EXPECT_EQ(n.launches_without_op, 1);  // the synchronize
  tl.separate_overlaps();

  // API calls sit on the launching thread's track; the unknown thread gets a named track.
  const std::int64_t my_tid = os_thread_id();
  int on_my_track = 0;
  for (const auto& s : tl.spans())
    if (s.cat == "cuda_api" && s.pid == pid && s.tid == my_tid) ++on_my_track;
  EXPECT_EQ(on_my_track, 3);
  bool gpu_named = false, unknown_named = false;
  for (const auto& p : tl.processes()) gpu_named = gpu_named || p.name == "GPU 0: NVIDIA H200";
  for (const auto& t : tl.threads())
    unknown_named = unknown_named || t.name == "CUDA thread 0xabcdef12";
  EXPECT_TRUE(gpu_named);
  EXPECT_TRUE(unknown_named);

  std::ostringstream out;
  write_chrome_trace(out, tl, {});
  const TraceCheck c = check_chrome_trace(out.str());
  EXPECT_TRUE(c.ok()) << c.summary();
  EXPECT_EQ(c.flows, 3);
}

TEST(ActivityTrace, GraphKernelsSharingOneLaunchGetDistinctFlowIds) {
  const std::int64_t t0 = 1'000'000;
  ActivityLog log;
  log.api = {{"cudaGraphLaunch", false, t0, t0 + 100, 1, 5, 77, 0}};
  for (int i = 0; i < 3; ++i) {
    DeviceActivity d = kernel("node", t0 + 200 + 100 * i, t0 + 290 + 100 * i, 3, 77);
    d.graph_id = 1;
    d.graph_node_id = 10 + i;
    log.device.push_back(d);
  }
  Timeline tl;
  tl.name_process(1, "host", 0);
  ActivityTraceOptions opt;
  opt.host_pid = 1;
  add_activity(tl, log, opt);
  ASSERT_EQ(tl.flows().size(), 3u);
  EXPECT_NE(tl.flows()[0].id, tl.flows()[1].id);
  EXPECT_NE(tl.flows()[1].id, tl.flows()[2].id);
  std::ostringstream out;
  write_chrome_trace(out, tl, {});
  const TraceCheck c = check_chrome_trace(out.str());
  EXPECT_TRUE(c.ok()) << c.summary();
}

TEST(ActivitySummary, KernelsCountInTheStepThatLaunchedThem) {
  // Two steps of 10 us; the second step's kernel runs after that step ended on the host.
  std::vector<StepSample> steps(2);
  steps[0].start_ns = 0, steps[0].end_ns = 10'000;
  steps[1].start_ns = 20'000, steps[1].end_ns = 30'000;
  ActivityLog log;
  log.api = {launch(1'000, 1'500, 1, 1), launch(21'000, 21'500, 1, 2)};
  log.device = {kernel("attend", 2'000, 6'000, 7, 1), kernel("attend", 29'000, 33'000, 7, 2)};
  const ProfileSummary s = summarize({}, steps, log);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].name, "attend");
  EXPECT_DOUBLE_EQ(s.kernels[0].per_step, 1.0);
  EXPECT_DOUBLE_EQ(s.kernels[0].mean_us, 4.0);
  EXPECT_DOUBLE_EQ(s.kernels[0].gpu_us_per_step, 4.0);
  EXPECT_DOUBLE_EQ(s.gpu_busy_share, 0.4);
}

TEST(Collectors, NullAndFake) {
  auto null = make_null_collector("no GPU here");
  EXPECT_FALSE(null->active());
  EXPECT_EQ(null->status(), "no GPU here");
  null->start();
  null->stop();
  EXPECT_TRUE(null->take().empty());

  ActivityLog log;
  log.device = {kernel("b", 50, 60, 1, 2), kernel("a", 10, 20, 1, 1)};
  FakeCollector fake(log);
  fake.start();
  fake.stop();
  const ActivityLog got = fake.take();
  ASSERT_EQ(got.device.size(), 2u);
  EXPECT_EQ(got.device[0].name, "a");  // sorted by start
  EXPECT_TRUE(fake.take().empty());
  EXPECT_EQ(fake.starts, 1);
  EXPECT_EQ(fake.stops, 1);
}

TEST(Collectors, FactoryReportsWhyWhenNoDeviceIsUsable) {
  std::string why;
  const bool usable = cuda_device_usable(&why);
  auto c = make_activity_collector();
  if (usable) {
    EXPECT_EQ(c->kind(), cupti_compiled() ? "cupti" : "null");
  } else {
    EXPECT_EQ(c->kind(), "null");
    EXPECT_FALSE(c->active());
    EXPECT_FALSE(why.empty());
    EXPECT_NE(c->status().find(why), std::string::npos) << c->status();
    EXPECT_NE(c->status().find("host spans only"), std::string::npos) << c->status();
    c->start();  // must be harmless
    c->stop();
    EXPECT_TRUE(c->take().empty());
  }
}

}  // namespace
}  // namespace mactune::prof
