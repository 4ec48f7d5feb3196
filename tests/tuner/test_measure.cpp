// measure_group's time cap: it includes the warm-up (docs/spec.md, `measure.time_cap`), so a
// warm-up of a million steps stops at the cap and the point still gets its few samples.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

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

class NullBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  DeviceFingerprint device() const override { return {}; }
  std::string timer_name() const override { return "steady_clock"; }
  void use_timer(const std::string&) override {}
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

}  // namespace
}  // namespace mactune::tuner
