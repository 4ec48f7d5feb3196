// The rules of `search: halving` (tuner/search/halving.h): the better half kept, ties never
// dropped, the stop conditions, the doubling budget.
#include <gtest/gtest.h>

#include <vector>

#include "tuner/search/halving.h"

namespace mactune::tuner {
namespace {

std::vector<HalvingScore> distinct(std::vector<double> scores) {
  std::vector<HalvingScore> out;
  for (double s : scores) out.push_back({s, s});
  return out;
}

TEST(Halving, KeepsTheBetterHalfInTheirOrder) {
  const auto s = distinct({1.4, 1.0, 1.3, 1.1, 1.2, 1.5, 1.6, 1.7});
  const HalvingStep step = halving_step(s, 0.01);
  EXPECT_EQ(step.keep, (std::vector<std::size_t>{1, 2, 3, 4}));
  EXPECT_FALSE(step.last);
}

TEST(Halving, AnOddCountKeepsTheLargerHalf) {
  const HalvingStep step = halving_step(distinct({1.3, 1.0, 1.2, 1.1, 1.5}), 0.01);
  EXPECT_EQ(step.keep, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_FALSE(step.last);
}

TEST(Halving, TwoLeftGoToOneAndThatIsTheLastRound) {
  const HalvingStep step = halving_step(distinct({1.2, 1.0}), 0.01);
  EXPECT_EQ(step.keep, (std::vector<std::size_t>{1}));
  EXPECT_TRUE(step.last);
}

TEST(Halving, ConfigsTheIntervalsCannotSeparateFromTheBestAreNeverDropped) {
  // Six configs: scores spread, but four of them overlap the best (tie score 1.0).
  std::vector<HalvingScore> s = {{1.00, 1.0}, {1.20, 1.0}, {1.30, 1.3},
                                 {1.25, 1.0}, {1.40, 1.0}, {1.50, 1.5}};
  HalvingStep step = halving_step(s, 0.01);
  // ceil(6/2) = 3 best by score are 0, 1, 3; index 4 is tied with the best too.
  EXPECT_EQ(step.keep, (std::vector<std::size_t>{0, 1, 3, 4}));
  EXPECT_TRUE(step.last) << "every kept config is tied: a tie set remains";
}

TEST(Halving, BeforeTiesAreHonoredTheBetterHalfIsKeptWhateverTheIntervals) {
  std::vector<HalvingScore> s = {{1.00, 1.0}, {1.20, 1.0}, {1.30, 1.0}, {1.25, 1.0}};
  const HalvingStep step = halving_step(s, 0.01, /*honor_ties=*/false);
  EXPECT_EQ(step.keep, (std::vector<std::size_t>{0, 1}));
  EXPECT_FALSE(step.last);
  EXPECT_TRUE(halving_step(std::vector<HalvingScore>{{1.0, 1.0}, {1.1, 1.0}}, 0.01, false).last);
}

TEST(Halving, WithinTheToleranceIsTied) {
  const HalvingStep step = halving_step(distinct({1.000, 1.009, 1.5, 1.6}), 0.01);
  EXPECT_EQ(step.keep, (std::vector<std::size_t>{0, 1}));
  EXPECT_TRUE(step.last);
  const HalvingStep strict = halving_step(distinct({1.000, 1.02, 1.5, 1.6}), 0.01);
  EXPECT_EQ(strict.keep, (std::vector<std::size_t>{0, 1}));
  EXPECT_FALSE(strict.last) << "1.02 is outside 1%: one more round to separate them";
}

TEST(Halving, EverythingTiedIsKeptAndLast) {
  const HalvingStep step = halving_step(std::vector<HalvingScore>(5, {1.0, 1.0}), 0.01);
  EXPECT_EQ(step.keep.size(), 5u);
  EXPECT_TRUE(step.last);
  EXPECT_TRUE(halving_step(distinct({1.0}), 0.01).last);
  EXPECT_TRUE(halving_step({}, 0.01).keep.empty());
}

TEST(Halving, TheBudgetDoublesUpToTheMaximum) {
  EXPECT_EQ(halving_samples(3, 0, 40), 3);
  EXPECT_EQ(halving_samples(3, 1, 40), 6);
  EXPECT_EQ(halving_samples(3, 3, 40), 24);
  EXPECT_EQ(halving_samples(3, 4, 40), 40);
  EXPECT_EQ(halving_samples(3, 60, 40), 40);
}

}  // namespace
}  // namespace mactune::tuner
