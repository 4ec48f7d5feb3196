// The CPU phase tracer, the decode loop and the per-phase summary, end to end on a stand-in
// session that reports phases from several threads: the written trace must pass the structural
// validator with match, plan, attend and merge in every step.
#include <gtest/gtest.h>

#include <atomic>
#include <sstream>
#include <thread>

#include "fake_session.h"
#include "profiler/activity.h"
#include "profiler/cpu_tracer.h"
#include "profiler/decode_loop.h"
#include "profiler/profile_trace.h"
#include "profiler/summary.h"
#include "profiler/tee_sink.h"
#include "profiler/trace_check.h"

namespace mactune::prof {
namespace {

Problem small_shape() {
  Problem p;
  p.batch = 2;
  p.q_heads = 8;
  p.kv_heads = 2;
  p.head_dim = 64;
  return p;
}

TraceCheckOptions decode_checks(int steps) {
  TraceCheckOptions opt;
  opt.phases_every_step = {"match", "attend", "merge"};
  opt.phases_where_present = {"plan"};
  opt.min_steps = steps;
  return opt;
}

struct Profiled {
  LoopResult loop;
  std::string json;
  std::vector<ThreadSpans> threads;
};

Profiled profile_fake(int steps, int warmup, int workers, int skip_merge_at = -1) {
  CpuPhaseTracer tracer;
  const Problem shape = small_shape();
  testing::FakeSession session(shape, &tracer, workers, skip_merge_at);
  auto none = make_null_collector("test: no GPU");
  const std::vector<int> requests = {0, 1};
  LoopOptions opt;
  opt.steps = steps;
  opt.warmup = warmup;
  Profiled p;
  p.loop = run_decode_loop(session, requests, shape, opt, tracer, *none);
  EXPECT_EQ(session.steps_run(), steps + warmup);
  const Timeline tl = make_profile_timeline(tracer, p.loop, none->take(), {});
  std::ostringstream out;
  write_chrome_trace(out, tl, {});
  p.json = out.str();
  p.threads = tracer.threads();
  return p;
}

TEST(CpuTrace, Steps6_Workers2_PassesTheValidatorWithEveryPhaseInEveryStep) {
  const Profiled p = profile_fake(6, 2, 2);
  const TraceCheck c = check_chrome_trace(p.json, decode_checks(6));
  EXPECT_TRUE(c.ok()) << c.summary();
  EXPECT_EQ(c.steps, 6);
  // The loop thread and 2 fresh workers per measured step (fewer if the OS reuses a tid).
  EXPECT_GE(c.tracks, 2);
  EXPECT_LE(c.tracks, 1 + 2 * 6);
  // Warm-up steps are not recorded: attend spans = (1 + 2 workers) x 6 measured steps.
  int attend = 0, match = 0;
  for (const auto& t : p.threads)
    for (const auto& s : t.spans) {
      attend += s.phase == Phase::attend;
      match += s.phase == Phase::match;
      EXPECT_GE(s.end_ns, s.start_ns);
    }
  EXPECT_EQ(attend, 3 * 6);
  EXPECT_EQ(match, 6);
}

TEST(CpuTrace, Steps4_AStepWithoutMergeIsFlagged) {
  const Profiled p = profile_fake(4, 1, 1, /*skip_merge_at=*/2);  // the 2nd measured step
  const TraceCheck c = check_chrome_trace(p.json, decode_checks(4));
  ASSERT_EQ(c.errors.size(), 1u) << c.summary();
  EXPECT_NE(c.errors[0].find("step 1"), std::string::npos) << c.errors[0];
  EXPECT_NE(c.errors[0].find("merge"), std::string::npos) << c.errors[0];
}

TEST(CpuTrace, Steps5_SummaryCoversEveryPhaseAndTheModeledBytes) {
  const Profiled p = profile_fake(5, 1, 2);
  const ProfileSummary s = summarize(p.threads, p.loop.steps);
  EXPECT_EQ(s.steps, 5);
  std::vector<std::string> names;
  for (const auto& ph : s.phases) {
    names.push_back(ph.name);
    EXPECT_EQ(ph.steps_present, 5) << ph.name;
    EXPECT_GT(ph.mean_wall_us, 0.0) << ph.name;
    EXPECT_LE(ph.share, 1.0) << ph.name;
    EXPECT_GE(ph.mean_thread_us, ph.mean_wall_us * 0.999) << ph.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"match", "plan", "attend", "merge"}));
  // attend: the loop thread's span holds the 2 worker spans of its step, so its wall time is
  // the loop thread's span alone and its thread time adds the workers'.
  double loop_attend_us = 0, all_attend_us = 0;
  for (const auto& t : p.threads)
    for (const auto& sp : t.spans)
      if (sp.phase == Phase::attend) {
        const double us = double(sp.end_ns - sp.start_ns) * 1e-3;
        all_attend_us += us;
        if (t.os_tid == p.loop.loop_tid) loop_attend_us += us;
      }
  for (const auto& ph : s.phases)
    if (ph.name == "attend") {
      EXPECT_DOUBLE_EQ(ph.spans_per_step, 3.0);
      EXPECT_NEAR(ph.mean_wall_us, loop_attend_us / 5, 1e-6);
      EXPECT_NEAR(ph.mean_thread_us, all_attend_us / 5, 1e-6);
      EXPECT_GT(ph.mean_thread_us, ph.mean_wall_us);
    }
  // kv_bytes_read of the fake = 1000 x 2 requests + step index (1..5 after 1 warm-up step).
  EXPECT_DOUBLE_EQ(s.kv_bytes_read, 2000.0 + 3.0);
  EXPECT_DOUBLE_EQ(s.skip_ratio, 0.75);
  EXPECT_GT(s.mean_step_us, 0.0);
  std::ostringstream table;
  print_summary(table, s);
  EXPECT_NE(table.str().find("attend"), std::string::npos);
  EXPECT_NE(table.str().find("KV read"), std::string::npos);
}

TEST(CpuPhaseTracer, ThreadsRecordIndependentlyAndExactly) {
  CpuPhaseTracer tracer;
  constexpr int kThreads = 4, kSpans = 5000;
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      const std::string inst = "inst" + std::to_string(t % 2);
      for (int i = 0; i < kSpans; ++i) {
        PhaseScope outer(&tracer, Phase::attend, inst);
        PhaseScope inner(&tracer, Phase::merge, inst);
      }
    });
  for (auto& t : pool) t.join();
  const auto threads = tracer.threads();
  ASSERT_EQ(threads.size(), std::size_t{kThreads});
  const auto names = tracer.instances();
  for (const auto& t : threads) {
    ASSERT_EQ(t.spans.size(), std::size_t{2 * kSpans});
    EXPECT_EQ(t.unmatched_ends, 0);
    // Spans are stored in end order: inner merge (depth 1) then outer attend (depth 0).
    EXPECT_EQ(t.spans[0].phase, Phase::merge);
    EXPECT_EQ(t.spans[0].depth, 1);
    EXPECT_EQ(t.spans[1].phase, Phase::attend);
    EXPECT_LE(t.spans[1].start_ns, t.spans[0].start_ns);
    EXPECT_GE(t.spans[1].end_ns, t.spans[0].end_ns);
    EXPECT_TRUE(names[t.spans[0].instance] == "inst0" || names[t.spans[0].instance] == "inst1");
  }
}

TEST(CpuPhaseTracer, MismatchedEndIsCountedNotRecorded) {
  CpuPhaseTracer tracer;
  tracer.begin(Phase::match, "x");
  tracer.end(Phase::attend);  // not the open phase
  tracer.end(Phase::match);
  tracer.end(Phase::merge);  // nothing open
  const auto t = tracer.threads();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].unmatched_ends, 2);
  ASSERT_EQ(t[0].spans.size(), 1u);
  EXPECT_EQ(t[0].spans[0].phase, Phase::match);
}

TEST(CpuPhaseTracer, RecordingOffDropsSpansButKeepsNesting) {
  CpuPhaseTracer tracer;
  tracer.set_recording(false);
  tracer.begin(Phase::attend, "x");
  tracer.set_recording(true);  // toggled inside a span: that span stays unrecorded
  tracer.begin(Phase::merge, "x");
  tracer.end(Phase::merge);
  tracer.end(Phase::attend);
  const auto t = tracer.threads();
  ASSERT_EQ(t[0].spans.size(), 1u);
  EXPECT_EQ(t[0].spans[0].phase, Phase::merge);
  EXPECT_EQ(t[0].unmatched_ends, 0);
}

TEST(CpuPhaseTracer, DefaultInstanceAndIgnoredPhases) {
  CpuPhaseTracer tracer;
  tracer.set_default_instance("mac_cpu_generic_hd64_f32");
  tracer.ignore(Phase::step);
  {
    PhaseScope step(&tracer, Phase::step);
    PhaseScope attend(&tracer, Phase::attend);  // no instance: the default one
    PhaseScope merge(&tracer, Phase::merge, "merge_named");
  }
  const auto t = tracer.threads();
  const auto names = tracer.instances();
  ASSERT_EQ(t[0].spans.size(), 2u);  // the step span is dropped
  EXPECT_EQ(t[0].spans[0].phase, Phase::merge);
  EXPECT_EQ(names[t[0].spans[0].instance], "merge_named");
  EXPECT_EQ(names[t[0].spans[1].instance], "mac_cpu_generic_hd64_f32");
  EXPECT_EQ(t[0].unmatched_ends, 0);
}

TEST(DecodeLoop, StopFlagEndsTheLoopEarlyWithTheStepsMeasured) {
  CpuPhaseTracer tracer;
  const Problem shape = small_shape();
  testing::FakeSession session(shape, &tracer, 0);
  auto none = make_null_collector("test");
  std::atomic<bool> stop{true};
  LoopOptions opt;
  opt.steps = 5;
  opt.warmup = 1;
  opt.stop = &stop;
  const std::vector<int> requests = {0};
  EXPECT_TRUE(run_decode_loop(session, requests, shape, opt, tracer, *none).steps.empty());
  EXPECT_EQ(session.steps_run(), 0);
  stop = false;
  EXPECT_EQ(run_decode_loop(session, requests, shape, opt, tracer, *none).steps.size(), 5u);
}

TEST(TeeSink, ForwardsInOrderAndUnwindsInReverse) {
  struct Log final : PhaseSink {
    std::string* out;
    char tag;
    void begin(Phase p, std::string_view) override { *out += tag, *out += name_of(p)[0]; }
    void end(Phase) override { *out += tag, *out += '.'; }
  };
  std::string trace;
  Log a, b;
  a.out = b.out = &trace;
  a.tag = 'A';
  b.tag = 'B';
  TeeSink tee{&a, nullptr, &b};
  EXPECT_EQ(tee.get(), &tee);
  { PhaseScope s(tee.get(), Phase::match); }
  EXPECT_EQ(trace, "AmBmB.A.");
  TeeSink one{&a};
  EXPECT_EQ(one.get(), &a);
  EXPECT_EQ(TeeSink{}.get(), nullptr);
}

TEST(StepInputs, DeterministicNonZeroAndDistinctPerStep) {
  const Problem shape = small_shape();
  const StepInputs a = make_step_inputs(shape, 2, 7, 3), b = make_step_inputs(shape, 2, 7, 3);
  const StepInputs c = make_step_inputs(shape, 2, 7, 4);
  EXPECT_EQ(a.q, b.q);
  EXPECT_NE(a.q, c.q);
  ASSERT_EQ(a.q.size(), std::size_t{2 * 8 * 64});
  ASSERT_EQ(a.k.size(), std::size_t{2 * 2 * 64});
  // The tuner's generator (kernels/session.h): +-U[0.25, 1), random signs.
  double sum_abs = 0, sum = 0;
  for (float x : a.q) {
    EXPECT_GE(std::abs(x), 0.25f);
    EXPECT_LT(std::abs(x), 1.0f);
    sum_abs += std::abs(x);
    sum += x;
  }
  EXPECT_NEAR(sum_abs / double(a.q.size()), 0.625, 0.05);
  EXPECT_NEAR(sum / double(a.q.size()), 0.0, 0.1);
  // Step 0 of a loop is a tuner point's step: the same seed, the same q, k, v.
  EXPECT_EQ(make_step_inputs(shape, 2, 7, 0).q, synthetic_step(shape, 2, 7).q);
}

}  // namespace
}  // namespace mactune::prof
