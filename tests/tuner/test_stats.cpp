#include <gtest/gtest.h>

#include <random>

#include "tuner/spec/stats.h"

namespace mactune::tuner {
namespace {

TEST(TunerStats, QuartilesAndMedianOfKnownSamples) {
  const std::vector<double> v = {5, 1, 4, 2, 3};  // sorted 1..5
  const TimeStats s = summarize(v);
  EXPECT_EQ(s.samples, 5);
  EXPECT_DOUBLE_EQ(s.median_s, 3);
  EXPECT_DOUBLE_EQ(s.q1_s, 2);
  EXPECT_DOUBLE_EQ(s.q3_s, 4);
  EXPECT_DOUBLE_EQ(s.min_s, 1);
  EXPECT_DOUBLE_EQ(s.max_s, 5);
  EXPECT_DOUBLE_EQ(s.mean_s, 3);
  EXPECT_NEAR(s.stdev_s, std::sqrt(2.5), 1e-12);
  EXPECT_NEAR(s.rel_noise, 1.4826 * 1.0 / 3.0, 1e-12);  // MAD of 1..5 is 1
}

TEST(TunerStats, InterpolatedQuantilesOfEvenCount) {
  const std::vector<double> v = {1, 2, 3, 4};
  const TimeStats s = summarize(v);
  EXPECT_DOUBLE_EQ(s.median_s, 2.5);
  EXPECT_DOUBLE_EQ(s.q1_s, 1.75);
  EXPECT_DOUBLE_EQ(s.q3_s, 3.25);
}

TEST(TunerStats, NoiseIsRobustToOneOutlier) {
  std::vector<double> v(20, 1.0);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += 0.001 * static_cast<double>(i % 5);
  v.push_back(50.0);  // one descheduled sample
  const TimeStats s = summarize(v);
  EXPECT_LT(s.rel_noise, 0.01);
  EXPECT_GT(s.stdev_s / s.mean_s, 1.0);  // what a mean/stdev rule would have seen
}

TEST(TunerConvergence, StopsOnNoiseAfterMinSamples) {
  StoppingPolicy p;
  p.min_samples = 5;
  p.max_samples = 100;
  p.noise = 0.01;
  Convergence c(p);
  for (int i = 0; i < 4; ++i) {
    c.add(1.0);
    EXPECT_FALSE(c.done()) << "stopped before min_samples at " << i;
  }
  c.add(1.0);
  EXPECT_TRUE(c.done());
  EXPECT_EQ(c.reason(), StopReason::noise);
}

TEST(TunerConvergence, NoisySamplesRunToTheCap) {
  StoppingPolicy p;
  p.min_samples = 3;
  p.max_samples = 12;
  p.noise = 0.001;
  p.stable_window = 1000;  // never "stable"
  Convergence c(p);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  int n = 0;
  while (!c.done()) {
    c.add(u(rng));
    ++n;
  }
  EXPECT_EQ(n, 12);
  EXPECT_EQ(c.reason(), StopReason::max_samples);
}

TEST(TunerConvergence, StabilisedNoiseStopsEarly) {
  StoppingPolicy p;
  p.min_samples = 5;
  p.max_samples = 1000;
  p.noise = 1e-6;  // unreachable
  p.stable_window = 6;
  p.stable_drift = 0.25;
  Convergence c(p);
  // Gaussian noise of 5%: the robust noise estimate settles near 0.05 and stays there.
  std::mt19937 rng(11);
  std::normal_distribution<double> g(1.0, 0.05);
  int n = 0;
  while (!c.done() && n < 1000) c.add(g(rng)), ++n;
  EXPECT_LT(n, 100);
  EXPECT_EQ(c.reason(), StopReason::stable);
}

TEST(TunerConvergence, MinTimeHoldsFastSamples) {
  StoppingPolicy p;
  p.min_samples = 2;
  p.min_time = 1.0;
  p.max_samples = 1000;
  Convergence c(p);
  int n = 0;
  while (!c.done()) c.add(0.125), ++n;
  EXPECT_EQ(n, 8);
}

}  // namespace
}  // namespace mactune::tuner
