// Calibration: Pareto front and pick rule on constructed curves, then a real sweep over a
// shipped trace whose schedule reads back.
#include <gtest/gtest.h>

#include <filesystem>

#include "kernels/error.h"
#include "replay/calibrate.h"
#include "replay_fixtures.h"

namespace mactune::replay {
namespace {

CalibrationPoint point(int K, int r, double tau, double skip, double err) {
  CalibrationPoint p;
  p.settings.mac.ring_capacity = K;
  p.settings.mac.band = r;
  p.settings.mac.tau = tau;
  p.fidelity.skip_ratio = skip;
  p.err = err;
  return p;
}

TEST(Choose, LargestSkipWithinBudgetAndParetoFront) {
  CalibrationOptions opt;
  opt.max_err = 0.01;
  LayerCalibration lc;
  lc.points = {point(512, 256, 0.6, 0.30, 0.09),     // 0: front, over budget
               point(512, 256, 0.9, 0.13, 0.008),    // 1: front, within: the pick
               point(512, 256, 0.95, 0.04, 0.0002),  // 2: front
               point(512, 64, 0.95, 0.05, 0.005),    // 3: front (between 1 and 2 on both axes)
               point(512, 64, 0.9, 0.12, 0.35)};     // 4: dominated by 1
  choose(lc, opt);
  EXPECT_EQ(lc.pick, 1);
  const bool front[] = {true, true, true, true, false};
  for (std::size_t i = 0; i < lc.points.size(); ++i) EXPECT_EQ(lc.points[i].pareto, front[i]) << i;
  EXPECT_FALSE(lc.points[0].within_budget);
  EXPECT_EQ(lc.chosen(opt).tau, 0.9);
}

TEST(Choose, TiesGoToTheConservativeSetting) {
  CalibrationOptions opt;
  opt.max_err = 0.01;
  LayerCalibration lc;
  // Equal skip and error (no hit changes between these taus): the larger tau wins.
  lc.points = {point(512, 256, 0.8, 0.1, 0.005), point(512, 256, 0.85, 0.1, 0.005),
               point(1024, 256, 0.85, 0.1, 0.005)};
  choose(lc, opt);
  EXPECT_EQ(lc.pick, 1);  // then the smaller K
}

TEST(Choose, NothingWithinBudgetMeansNoReuse) {
  CalibrationOptions opt;
  opt.max_err = 1e-4;
  opt.ring_capacities = {256, 512};
  opt.bands = {128};
  LayerCalibration lc;
  lc.points = {point(256, 128, 0.9, 0.1, 0.02)};
  choose(lc, opt);
  EXPECT_EQ(lc.pick, -1);
  const MacParams off = lc.chosen(opt);
  EXPECT_EQ(off.tau, 1.0);
  EXPECT_EQ(off.ring_capacity, 256);
  EXPECT_EQ(off.band, 128);
}

TEST(CalibrationOptions, RefusesBadInput) {
  CalibrationOptions opt;
  opt.metric = "p95";
  EXPECT_THROW(opt.validate(), InputError);
  opt.metric = "mean";
  opt.taus = {};
  EXPECT_THROW(opt.validate(), InputError);
  opt.taus = {0.5};
  opt.bands = {0};
  EXPECT_THROW(opt.validate(), InputError);
  opt.bands = {64};
  opt.max_err = -1;
  EXPECT_THROW(opt.validate(), InputError);
}

TEST(CalibrationOptions, GridIsTheProductInSweepOrder) {
  CalibrationOptions opt;
  opt.base.mac.pick = PickRule::newest;
  opt.ring_capacities = {256, 512};
  opt.bands = {64};
  opt.accept_eps = {1.0, 0.5};
  opt.taus = {0.5, 0.9};
  const std::vector<ReplaySettings> g = opt.grid();
  ASSERT_EQ(g.size(), 8u);
  EXPECT_EQ(g[0].mac.ring_capacity, 256);
  EXPECT_EQ(g[0].mac.accept_eps, 1.0);
  EXPECT_EQ(g[1].mac.tau, 0.9);  // tau varies fastest
  EXPECT_EQ(g[2].mac.accept_eps, 0.5);
  EXPECT_EQ(g[7].mac.ring_capacity, 512);
  for (const ReplaySettings& s : g) {
    EXPECT_EQ(s.mac.pick, PickRule::newest);  // the base settings carry through
    EXPECT_EQ(s.mac.band, 64);
  }
}

// A real sweep: two traces pooled, three taus, budget 1% p99. The schedule it writes reads back.
TEST(Calibrate, Code1kText1k_K512_r256_Budget1pct) {
  const DecodeTrace code = DecodeTrace::open(testing::trace_path("code_1k.safetensors"));
  const DecodeTrace text = DecodeTrace::open(testing::trace_path("text_1k.safetensors"));
  const std::vector<const DecodeTrace*> traces = {&code, &text};
  CalibrationOptions opt;
  opt.taus = {0.75, 0.9, 1.0};
  opt.max_err = 0.01;
  int per_trace = 0, pooled = 0;
  CalibrationCallbacks cb;
  cb.on_trace_point = [&](const DecodeTrace&, const ReplayPoint& p) {
    EXPECT_EQ(p.fidelity.rel_err.count, 1024 * 8);
    ++per_trace;
  };
  cb.on_point = [&](int layer, const CalibrationPoint& p) {
    EXPECT_EQ(layer, 2);
    EXPECT_EQ(p.fidelity.rel_err.count, 2 * 1024 * 8);  // pooled over both traces
    ++pooled;
  };
  const auto result = calibrate(traces, {}, opt, cb);
  EXPECT_EQ(per_trace, 6);
  EXPECT_EQ(pooled, 3);
  ASSERT_EQ(result.size(), 1u);
  const LayerCalibration& lc = result[0];
  ASSERT_EQ(lc.points.size(), 3u);
  // tau 0.75: p99 well above 1% on code_1k (expected_replay: 0.085); tau 1: no reuse, no error.
  EXPECT_FALSE(lc.points[0].within_budget);
  EXPECT_GT(lc.points[0].fidelity.skip_ratio, lc.points[1].fidelity.skip_ratio);
  EXPECT_EQ(lc.points[2].fidelity.skip_ratio, 0.0);
  EXPECT_LT(lc.points[2].err, 1e-5);  // f32 roundoff of full attention (CPU engine)
  ASSERT_GE(lc.pick, 1);
  const CalibrationPoint& pick = lc.points[std::size_t(lc.pick)];
  EXPECT_LE(pick.err, 0.01);
  for (const CalibrationPoint& p : lc.points) {
    if (p.within_budget) {
      EXPECT_LE(p.fidelity.skip_ratio, pick.fidelity.skip_ratio);
    }
  }

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("mactune_calib_" + std::to_string(::getpid()) + ".yaml"))
                               .string();
  save_layer_schedule(path, calibration_schedule(result, opt, traces));
  const LayerSchedule s = load_layer_schedule(path);
  std::filesystem::remove(path);
  EXPECT_EQ(s.for_layer(2).tau, pick.settings.mac.tau);
  EXPECT_EQ(s.for_layer(2).min_context, 0);
  EXPECT_EQ(s.measured.at(2).at("skip_ratio"), pick.fidelity.skip_ratio);
  ASSERT_TRUE(s.provenance);
  EXPECT_EQ(s.provenance->traces.size(), 2u);
  EXPECT_EQ(s.provenance->traces[1].sha256, text.sha256());
  EXPECT_THROW(calibrate(traces, {5}, opt), InputError);  // no trace holds layer 5
}

}  // namespace
}  // namespace mactune::replay
