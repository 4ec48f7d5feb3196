// The pruned exact match of the CPU engine (`match = pruned`, docs/design.md "Pruned match"):
// per ring entry a 4-bit copy of its query with a rigorous error bound, kept current by the
// ring write, and from it a lower bound on the d2 that the exhaustive scan (dist2) computes,
// so that a row is read in full only where the bound cannot settle the decision.
//
// The copy: x^ = s c, c_i = round(x_i / s) clamped to [-7, 7], s = max|x_i| / 7 (fp32), codes
// stored as c + 8 in nibbles (kernel_api.h SketchArgs has the layout), with c2 = sum c_i^2 and
// err >= ||x - x^|| (computed in double, rounded up). From the kernel's fp32 dot product
// dot_n = sum q_i (c_i + 8):
//   E = ||q - x^||^2 = ||q||^2 - 2 s (dot_n - 8 sum q) + s^2 c2, less its rounding bound, is a
//   lower bound E_lo on ||q - x^||^2; the triangle inequality gives ||q - x|| >= sqrt(E_lo) - err;
//   and the scan's fp32 sum of squares of nonnegative terms is never below (1 - gamma) times the
//   exact ||q - x||^2 (every rounding of a nonnegative sum or product loses at most a factor
//   1 - u; gamma = n u / (1 - n u) for n >= the roundings on any path, 2 D + 16 here).
// lower_bound() multiplies by a further 1 - kSafety: what it returns is never above the computed
// d2 (tests/cpu/test_prune.cpp checks the margin on adversarial rows). Host code, plain C++.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace mactune::cpu::prune {

inline constexpr int kLevels = 7;        // codes in [-7, 7]
inline constexpr double kU = 0x1p-24;    // fp32 unit roundoff
inline constexpr double kSafety = 1e-4;  // relative margin beyond the proven bounds
inline constexpr double kSlop = 1e-12;   // double rounding (D <= 256: below 1e-13), generously
inline constexpr double kTiny = 1e-37;   // subnormal fp32 results: absolute, below FLT_MIN

// gamma_n = n u / (1 - n u): the relative error of n fp32 roundings compounded.
constexpr double gamma(int n) {
  return n * kU / (1.0 - n * kU);
}

// The per-entry data of the bound.
struct Sketch {
  float scale = 0.0f;  // s
  float c2 = 0.0f;     // sum c_i^2 (an integer, exact in fp32)
  float err = 0.0f;    // >= ||x - s c||
};

// Quantizes x[0, D) (the stored ring q, exact fp32 values) into D/2 bytes of codes.
inline Sketch quantize(const float* x, int D, std::uint8_t* codes) {
  const int H = D / 2;
  double amax = 0.0;
  bool finite = true;
  for (int i = 0; i < D; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
  }
  Sketch s;
  s.scale = finite ? static_cast<float>(amax / kLevels) : 0.0f;
  int c[512];
  double e2 = 0.0, c2 = 0.0;
  for (int i = 0; i < D; ++i) {
    int ci = 0;
    if (s.scale > 0.0f) ci = static_cast<int>(std::lround(static_cast<double>(x[i]) / s.scale));
    ci = std::clamp(ci, -kLevels, kLevels);
    c[i] = ci;
    const double r = static_cast<double>(x[i]) - static_cast<double>(s.scale) * ci;
    e2 += r * r;
    c2 += static_cast<double>(ci) * ci;
  }
  for (int j = 0; j < H; ++j)
    codes[j] = static_cast<std::uint8_t>((c[j] + 8) | ((c[j + H] + 8) << 4));
  s.c2 = static_cast<float>(c2);
  if (!finite) {
    s.err = std::numeric_limits<float>::infinity();  // no bound: the row is always read
  } else {
    const float e = static_cast<float>(std::sqrt(e2) * (1.0 + kSlop));
    s.err = e == 0.0f ? 0.0f : std::nextafter(e, std::numeric_limits<float>::infinity());
  }
  return s;
}

// What the bound needs of the current query (q rounded to the KV dtype, as the scan reads it).
struct Query {
  double q2 = 0.0, sum = 0.0, l1 = 0.0;
  double dot_err = 0.0;  // >= |fp32 dot_n - exact dot_n|: gamma_(2D+16) sum |q_i| 15
  double gamma_scan = 0.0;
  bool finite = true;
};

inline Query prepare(const float* q, int D) {
  Query r;
  for (int i = 0; i < D; ++i) {
    const double x = q[i];
    r.finite = r.finite && std::isfinite(x);
    r.q2 += x * x;
    r.sum += x;
    r.l1 += std::fabs(x);
  }
  r.dot_err = gamma(2 * D + 16) * 15.0 * r.l1 + kTiny;
  r.gamma_scan = gamma(2 * D + 16);
  return r;
}

// A lower bound on ||q - s c||^2 from the kernel's dot_n (0 when it says nothing).
inline double e_lo(const Query& q, float dot_n, float scale, float c2) {
  const double s = scale;
  const double dot = static_cast<double>(dot_n) - 8.0 * q.sum;
  const double mag = q.q2 + 2.0 * s * std::fabs(dot) + s * s * c2 + 16.0 * s * q.l1;
  const double e = q.q2 - 2.0 * s * dot + s * s * c2;
  return e - 2.0 * s * q.dot_err - kSlop * mag;
}

// The root that a row's sqrt(E_lo) - err must reach for its lower bound to reach `t`.
inline double root_for(const Query& q, double t) {
  return std::sqrt((std::max(t, 0.0) + kTiny) /
                   ((1.0 - q.gamma_scan) * (1.0 - kSafety) * (1.0 - kSlop)));
}

// Whether lower_bound(elo, err) >= t, with root = root_for(q, t), without a square root.
inline bool reaches(double elo, float err, double root) {
  const double r = root + static_cast<double>(err);
  return elo * (1.0 - kSlop) >= r * r * (1.0 + kSlop);
}

// A lower bound on the fp32 d2 the exhaustive scan computes for the row.
inline double lower_bound(const Query& q, double elo, float err) {
  if (!q.finite || !(elo > 0.0)) return 0.0;
  const double r = std::sqrt(elo) * (1.0 - kSlop) - static_cast<double>(err);
  if (!(r > 0.0)) return 0.0;
  return std::max(0.0, r * r * (1.0 - q.gamma_scan) * (1.0 - kSafety) * (1.0 - kSlop) - kTiny);
}

}  // namespace mactune::cpu::prune
