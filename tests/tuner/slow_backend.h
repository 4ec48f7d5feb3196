// A test double for a build with one kernel deliberately slowed: a MeasureBackend decorator that
// makes every sample of the points it matches (one side, "mac" or "full", and a set of launch
// parameters) last FACTOR times as long, by spinning after the real step inside the timed
// sample. `mactune compare` must flag the slowed points, `search: halving` must drop the slowed
// config. The tests run the tuner in process with it (TuneOptions::wrap_backend, tune_slowed);
// nothing of it is in the product.
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/engine_config.h"
#include "kernels/fields.h"
#include "tuner/measure/measure.h"
#include "tuner/tune/tune.h"

namespace mactune::tuner::testing {

struct Slowdown {
  bool mac = true;                                         // the side it slows
  std::vector<std::pair<std::string, std::string>> match;  // launch parameters, key -> value
  double factor = 2.0;
};

class SlowedCase final : public Case {
 public:
  SlowedCase(std::unique_ptr<Case> inner, double factor)
      : inner_(std::move(inner)), factor_(factor) {}
  std::string instance() const override { return inner_->instance(); }
  void run() override { inner_->run(); }
  double sample() override {
    const auto t0 = std::chrono::steady_clock::now();
    const double s = inner_->sample();
    const auto until = t0 + (std::chrono::steady_clock::now() - t0) * factor_;
    while (std::chrono::steady_clock::now() < until) {
    }
    return s * factor_;
  }
  bool disturbed() const override { return inner_->disturbed(); }
  StepStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<Case> inner_;
  double factor_;
};

class SlowedBackend final : public MeasureBackend {
 public:
  // `slowed` (may be null) counts the cases it slowed: a test asserts it is not zero.
  SlowedBackend(std::unique_ptr<MeasureBackend> inner, Slowdown sd, int* slowed = nullptr)
      : inner_(std::move(inner)), sd_(std::move(sd)), slowed_(slowed) {
    // The keys are the CPU engine's launch parameters, in their canonical spelling, so that a
    // typo cannot make the double slow nothing (the tests would then pass for nothing).
    EXPECT_FALSE(sd_.match.empty()) << "a slowdown without a launch parameter slows every side";
    for (auto& [key, value] : sd_.match) {
      const Field<cpu::EngineConfig>* f = find_field<cpu::EngineConfig>(key);
      EXPECT_TRUE(f && f->role == FieldRole::param) << key << ": not a CPU launch parameter";
      if (f) value = f->text(f->parse(value));
    }
  }

  Backend kind() const override { return inner_->kind(); }
  DeviceFingerprint device() const override { return inner_->device(); }
  Timer timer() const override { return inner_->timer(); }
  void use_timer(std::optional<Timer> t) override { inner_->use_timer(t); }
  std::vector<InstanceDesc> instances() const override { return inner_->instances(); }
  std::pair<std::string, std::string> instance_names(const TunePoint& p) const override {
    return inner_->instance_names(p);
  }
  std::string can_run(const TunePoint& p) const override { return inner_->can_run(p); }
  double memory_available() const override { return inner_->memory_available(); }
  double case_bytes(const TunePoint& p, bool mac) const override {
    return inner_->case_bytes(p, mac);
  }
  std::unique_ptr<Case> make_case(const TunePoint& p, bool mac, std::uint64_t seed) override {
    std::unique_ptr<Case> c = inner_->make_case(p, mac, seed);
    if (!matches(p, mac)) return c;
    if (slowed_) ++*slowed_;
    return std::make_unique<SlowedCase>(std::move(c), sd_.factor);
  }
  void flush_caches() override { inner_->flush_caches(); }
  ClockState clock_begin() override { return inner_->clock_begin(); }
  ClockState clock_end() override { return inner_->clock_end(); }

 private:
  bool matches(const TunePoint& p, bool mac) const {
    if (mac != sd_.mac) return false;
    const std::string have = "," + p.launch_text() + ",";
    for (const auto& [key, value] : sd_.match)
      if (have.find("," + key + "=" + value + ",") == std::string::npos) return false;
    return true;
  }

  std::unique_ptr<MeasureBackend> inner_;
  Slowdown sd_;
  int* slowed_;
};

// What `mactune tune NAME.yaml --no-report` run in `dir` does (a tiny_spec writes NAME.db and
// NAME.json there), in process, with the spec's backend slowed by `sd`. Returns the result,
// the progress lines (the CLI's stderr) and how many cases were slowed.
struct SlowedTune {
  TuneResult result;
  std::string progress;
  int slowed = 0;
};

inline SlowedTune tune_slowed(const std::string& dir, const std::string& name, Slowdown sd) {
  SlowedTune out;
  TuneOptions o;
  o.spec_path = dir + "/" + name + ".yaml";
  o.db_path = dir + "/" + name + ".db";
  o.dispatch_path = dir + "/" + name + ".json";
  o.report = false;
  o.command = "mactune tune " + name + ".yaml --no-report (a kernel slowed, in process)";
  o.wrap_backend = [&](std::unique_ptr<MeasureBackend> b) -> std::unique_ptr<MeasureBackend> {
    return std::make_unique<SlowedBackend>(std::move(b), sd, &out.slowed);
  };
  std::FILE* log = std::tmpfile();
  Progress progress(log, false);
  out.result = run_tune(o, progress);
  std::fflush(log);
  std::rewind(log);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, log)) > 0;) out.progress.append(buf, n);
  std::fclose(log);
  return out;
}

}  // namespace mactune::tuner::testing
