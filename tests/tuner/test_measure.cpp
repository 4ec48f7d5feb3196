// measure_group's time cap: it includes the warm-up (docs/spec.md, `measure.time_cap`), so a
// warm-up of a million steps stops at the cap and the point still gets its few samples. The CPU
// backend's kept sessions: a case built on one measures what a freshly prefilled one does.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kernels/cpu/session.h"
#include "tuner/measure/measure.h"

namespace mactune::tuner {
namespace {

// A case whose every step takes about a millisecond, counting its warm-up steps and samples.
class SlowCase final : public Case {
 public:
  std::string instance() const override { return "slow"; }
  void run() override {
    ++runs;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double sample() override {
    ++samples;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return 1e-3;
  }
  StepStats stats() const override { return {}; }
  int runs = 0, samples = 0;
};

class NullBackend final : public MeasureBackend {
 public:
  Backend kind() const override { return Backend::cpu; }
  DeviceFingerprint device() const override { return {}; }
  Timer timer() const override { return Timer::steady_clock; }
  void use_timer(std::optional<Timer>) override {}
  std::vector<InstanceDesc> instances() const override { return {}; }
  std::pair<std::string, std::string> instance_names(const TunePoint&) const override { return {}; }
  std::string can_run(const TunePoint&) const override { return ""; }
  double memory_available() const override { return 0; }
  double case_bytes(const TunePoint&, bool) const override { return 0; }
  std::unique_ptr<Case> make_case(const TunePoint&, bool, std::uint64_t) override {
    return nullptr;
  }
  void flush_caches() override {}
  ClockState clock_begin() override { return {}; }
  ClockState clock_end() override { return {}; }
};

TEST(MeasureGroup, WarmupStopsAtTheTimeCap) {
  NullBackend backend;
  SlowCase a, b;
  Case* cases[] = {&a, &b};
  MeasurePolicy policy;
  policy.stop.warmup = 1000000;  // ~2000 s of warm-up without the cap
  policy.stop.min_samples = 5;
  policy.stop.max_samples = 1000;
  const double cap = 0.05;
  const GroupResult r = measure_group(backend, cases, policy, cap, nullptr);
  // At a millisecond a step, the cap allows ~25 warm-up rounds; far below a million.
  EXPECT_LT(a.runs, 1000);
  EXPECT_LT(b.runs, 1000);
  // The cap always leaves a few samples per side.
  EXPECT_GE(a.samples, 3);
  EXPECT_GE(b.samples, 3);
  ASSERT_EQ(r.sides.size(), 2u);
  EXPECT_EQ(r.sides[0].stop, StopReason::time_cap);
}

// The CPU backend keeps the prefilled session of a case that ended and hands it to the next
// case of the same shape, launch and seed at another hit rate (SessionPool in backend_cpu.cpp):
// after the warm-up, its steps do what a fresh session's do (the decisions' totals and every
// modeled byte; tests/cpu/test_api.cpp compares outputs and decisions of the engine itself).
TEST(CpuBackend, AKeptSessionMeasuresWhatAFreshOneDoes) {
  TunePoint p;
  p.shape.batch = 2;
  p.shape.q_heads = 8;
  p.shape.kv_heads = 2;
  p.shape.head_dim = 64;
  p.shape.kv_dtype = DType::bf16;
  p.context = 900;
  p.mac.ring_capacity = 64;
  p.mac.band = 16;
  p.mac.min_context = 256;
  p.forced.enabled = true;
  p.forced.lag = {LagKind::uniform, 1, 64};  // up to K: lags that reach the slot a step rewrites
  p.cpu.threads = 2;
  p.cpu.chunk_tokens = 128;
  TunePoint at_a = p, at_b = p;
  at_a.forced.hit_rate = 0.25;
  at_b.forced.hit_rate = 0.75;
  const auto warm = [](Case& c) {
    c.run();
    c.run();
    return c.stats();
  };
  for (const bool mac : {true, false}) {
    SCOPED_TRACE(mac ? "mac" : "full");
    StepStats fresh, kept, other;
    {
      auto backend = make_cpu_backend();
      fresh = warm(*backend->make_case(at_b, mac, 11));
    }
    {
      auto backend = make_cpu_backend();
      const std::size_t arenas = cpu::arena_cache_held_bytes();
      other = warm(*backend->make_case(at_a, mac, 11));
      EXPECT_EQ(cpu::arena_cache_held_bytes(), arenas)
          << "the ended case's session is kept, its KV arena with it";
      kept = warm(*backend->make_case(at_b, mac, 11));
      EXPECT_EQ(cpu::arena_cache_held_bytes(), arenas) << "the kept session was taken";
    }
    EXPECT_EQ(kept.kv_tokens_read, fresh.kv_tokens_read);
    EXPECT_EQ(kept.head_tokens_read, fresh.head_tokens_read);
    EXPECT_EQ(kept.hit_heads, fresh.hit_heads);
    EXPECT_EQ(kept.groups_all_hit, fresh.groups_all_hit);
    EXPECT_EQ(kept.groups_mixed, fresh.groups_mixed);
    EXPECT_EQ(kept.match_rows_read, fresh.match_rows_read);
    EXPECT_EQ(kept.modeled_bytes(), fresh.modeled_bytes());
    if (mac) {
      EXPECT_LT(other.hit_heads, fresh.hit_heads) << "the two rates differ in work";
    }
  }
}

}  // namespace
}  // namespace mactune::tuner
