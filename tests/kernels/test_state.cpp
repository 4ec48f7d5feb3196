// The state algebra: merge against one softmax over the union, removal and its guard.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/reference.h"

namespace mactune::ref {
namespace {

constexpr int kD = 16;

struct Scored {
  std::vector<double> s;  // scores
  std::vector<Vec> v;     // values
};

Scored random_set(std::mt19937_64& rng, int n, double center, double spread) {
  std::normal_distribution<double> nd(0.0, 1.0);
  Scored x;
  for (int j = 0; j < n; ++j) {
    x.s.push_back(center + spread * nd(rng));
    Vec v(kD);
    for (double& e : v) e = nd(rng);
    x.v.push_back(v);
  }
  return x;
}

// The state of a set straight from its definition.
State direct(const Scored& x) {
  State st(kD);
  if (x.s.empty()) return st;
  double mx = -INFINITY;
  for (double s : x.s) mx = std::max(mx, s);
  double z = 0;
  for (double s : x.s) z += std::exp(s - mx);
  st.lse = mx + std::log(z);
  for (std::size_t j = 0; j < x.s.size(); ++j)
    for (int i = 0; i < kD; ++i) st.o[i] += std::exp(x.s[j] - st.lse) * x.v[j][i];
  return st;
}

Scored join(const Scored& a, const Scored& b) {
  Scored u = a;
  u.s.insert(u.s.end(), b.s.begin(), b.s.end());
  u.v.insert(u.v.end(), b.v.begin(), b.v.end());
  return u;
}

double rel_err(const Vec& a, const Vec& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

bool finite(const State& s) {
  for (double x : s.o)
    if (!std::isfinite(x)) return false;
  return !std::isnan(s.lse);
}

TEST(StateAlgebra, MergeEqualsSoftmaxOverTheUnion) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> off(-30.0, 30.0);
  for (int trial = 0; trial < 200; ++trial) {
    const Scored a = random_set(rng, 1 + trial % 17, 0.0, 3.0);
    const Scored b = random_set(rng, 1 + trial % 11, off(rng), 3.0);
    const State m = merge(direct(a), direct(b));
    const State u = direct(join(a, b));
    EXPECT_NEAR(m.lse, u.lse, 1e-12 * std::max(1.0, std::fabs(u.lse)));
    EXPECT_LT(rel_err(m.o, u.o), 1e-12);
  }
}

TEST(StateAlgebra, MergeIsCommutativeAndAssociative) {
  std::mt19937_64 rng(2);
  for (int trial = 0; trial < 100; ++trial) {
    const State a = direct(random_set(rng, 5, -20.0, 4.0));
    const State b = direct(random_set(rng, 7, 10.0, 4.0));
    const State c = direct(random_set(rng, 3, 25.0, 4.0));
    const State ab = merge(a, b), ba = merge(b, a);
    EXPECT_NEAR(ab.lse, ba.lse, 1e-13 * std::fabs(ab.lse) + 1e-14);
    EXPECT_LT(rel_err(ab.o, ba.o), 1e-14);
    const State l = merge(merge(a, b), c), r = merge(a, merge(b, c));
    EXPECT_NEAR(l.lse, r.lse, 1e-13 * std::fabs(l.lse) + 1e-14);
    EXPECT_LT(rel_err(l.o, r.o), 1e-13);
  }
}

TEST(StateAlgebra, EmptySidesPassThroughAndNeverMakeNaN) {
  std::mt19937_64 rng(3);
  const State a = direct(random_set(rng, 4, 1.0, 1.0));
  const State e(kD);
  const State ae = merge(a, e), ea = merge(e, a), ee = merge(e, e);
  EXPECT_EQ(ae.lse, a.lse);
  EXPECT_EQ(ea.lse, a.lse);
  EXPECT_EQ(ae.o, a.o);
  EXPECT_EQ(ea.o, a.o);
  EXPECT_TRUE(ee.empty());
  EXPECT_TRUE(finite(ee));
  for (double x : ee.o) EXPECT_EQ(x, 0.0);
  // An empty left side holding garbage is overwritten, not multiplied by zero.
  State junk(kD);
  junk.o.assign(kD, NAN);
  EXPECT_TRUE(finite(merge(junk, a)));
  EXPECT_TRUE(finite(merge(junk, e)));
}

TEST(StateAlgebra, RemovalRecoversTheRestWhereWellConditioned) {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 100; ++trial) {
    const Scored a = random_set(rng, 20, 0.0, 2.0);
    const Scored w = random_set(rng, 5, -1.0, 2.0);
    const State f = direct(join(a, w));
    bool fired = true;
    const State got = remove(f, direct(w), 1e-4, &fired);
    const State want = direct(a);
    const double t = std::exp(direct(w).lse - f.lse);
    ASSERT_LT(t, 0.9);
    EXPECT_FALSE(fired);
    EXPECT_NEAR(got.lse, want.lse, 1e-12);
    EXPECT_LT(rel_err(got.o, want.o), 1e-11 / (1 - t));
  }
}

TEST(StateAlgebra, RemovalGuardFiresWithoutNaNAsTheRemovedPartTakesAllTheMass) {
  std::mt19937_64 rng(5);
  int fired_count = 0;
  for (double gap : {5.0, 10.0, 20.0, 40.0, 80.0, 1000.0}) {
    const Scored a = random_set(rng, 3, -gap, 0.1);
    const Scored w = random_set(rng, 3, 0.0, 0.1);
    const State f = direct(join(a, w));
    bool fired = false;
    const State got = remove(f, direct(w), 1e-4, &fired);
    EXPECT_TRUE(finite(got)) << gap;
    fired_count += fired;
    if (fired) {
      EXPECT_TRUE(got.empty());
    }
    if (gap >= 20.0) {
      EXPECT_TRUE(fired) << gap;
    }
  }
  EXPECT_GE(fired_count, 4);
  // W = F exactly: t = 1.
  const State f = direct(random_set(rng, 4, 0.0, 1.0));
  bool fired = false;
  EXPECT_TRUE(remove(f, f, 1e-4, &fired).empty());
  EXPECT_TRUE(fired);
  // Removing an empty W returns F; removing from an empty F stays empty.
  EXPECT_EQ(remove(f, State(kD), 1e-4, &fired).lse, f.lse);
  EXPECT_FALSE(fired);
}

}  // namespace
}  // namespace mactune::ref
