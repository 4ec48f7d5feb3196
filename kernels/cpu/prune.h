// The pruned exact match of the CPU engine (`match = pruned`, docs/design.md "Pruned match"):
// per ring entry a 4-bit copy of its query with a rigorous error bound, kept current by the
// ring write, and from it a lower bound on the d2 that the exhaustive scan (dist2) computes,
// so that a row is read in full only where the bound cannot settle the decision.
//
// The copy: x^ = s c, c_i = round(x_i / s) clamped to [-7, 7], s = max|x_i| / 7 (fp32), codes
// stored as c + 8 in nibbles (kernel_api.h SketchArgs has the layout), with c2 = sum c_i^2,
// norm >= ||x^|| and err >= ||x - x^|| (computed in double, rounded up). The query goes to
// int8 the same way: q = t a + r, a_i = round(q_i / t) in [-127, 127], t = max|q_i| / 127, and
// r's norm kept (rounded up). The kernel's integer dot A = sum a_i (c_i + 8) is exact, so
//   q.c = t (A - 8 sum a) + r.c  with  |r.c| <= ||r|| ||c||  (Cauchy-Schwarz), and
//   E = ||q - x^||^2 = ||q||^2 - 2 s q.c + s^2 c2 >= ||q||^2 - 2 s t (A - 8 sum a) + s^2 c2
//       - 2 ||r|| norm,
// evaluated in double less its rounding bound: a lower bound E_lo on ||q - x^||^2. The
// triangle inequality gives ||q - x|| >= sqrt(E_lo) - err; and the scan's fp32 sum of squares of
// nonnegative terms is never below (1 - gamma) times the exact ||q - x||^2 (every rounding of a
// nonnegative sum or product loses at most a factor 1 - u; gamma = n u / (1 - n u) for n >= the
// roundings on any path, 2 D + 16 here).
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
  float norm = 0.0f;   // >= ||s c||
  float err = 0.0f;    // >= ||x - s c||
};

// An upper bound in fp32 on the nonnegative double v, rounded up past its double error too.
inline float round_up(double v) {
  const float f = static_cast<float>(v * (1.0 + kSlop));
  return f == 0.0f ? 0.0f : std::nextafter(f, std::numeric_limits<float>::infinity());
}

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
  s.norm = round_up(static_cast<double>(s.scale) * std::sqrt(c2));
  // No bound for a non-finite row: it is always read.
  s.err = finite ? round_up(std::sqrt(e2)) : std::numeric_limits<float>::infinity();
  return s;
}

// What the bound needs of the current query (q rounded to the KV dtype, as the scan reads it).
struct Query {
  double q2 = 0.0;     // ||q||^2
  double two_t = 0.0;  // 2 t, the int8 codes' step
  double sum8 = 0.0;   // 8 sum a_i: A - sum8 = a.c exactly
  double two_r = 0.0;  // >= 2 ||q - t a||
  double gamma_scan = 0.0;
  bool finite = true;
};

// x rounded to the nearest integer (ties to even), for |x| < 2^51: adding 1.5 * 2^52 leaves no
// fraction bits, and taking it away again is exact.
inline double nearest(double x) {
  constexpr double kMagic = 6755399441055744.0;
  return (x + kMagic) - kMagic;
}

inline constexpr int kQueryLevels = 127;  // the query's int8 codes, in [-127, 127]

// The query's bound data, and its int8 codes into a[0, D).
inline Query prepare(const float* q, int D, std::int8_t* a) {
  Query r;
  double amax = 0.0;
  for (int i = 0; i < D; ++i) {
    const double x = q[i];
    r.finite = r.finite && std::isfinite(x);
    r.q2 += x * x;
    amax = std::max(amax, std::fabs(x));
  }
  const double t = r.finite ? amax / kQueryLevels : 0.0;
  // Any integer codes would do (r is what they leave, computed from them): the nearest ones,
  // found with a multiply and a round-to-nearest add (no library call on a baseline x86-64).
  const double inv = t > 0.0 ? 1.0 / t : 0.0;
  double r2 = 0.0, sum = 0.0;
  for (int i = 0; i < D; ++i) {
    const double ai = t > 0.0 ? std::clamp(nearest(static_cast<double>(q[i]) * inv),
                                           -static_cast<double>(kQueryLevels),
                                           static_cast<double>(kQueryLevels))
                              : 0.0;  // a zero or non-finite query: no codes (no bound)
    a[i] = static_cast<std::int8_t>(ai);
    const double ri = static_cast<double>(q[i]) - t * static_cast<double>(ai);
    r2 += ri * ri;
    sum += static_cast<double>(ai);
  }
  r.two_t = 2.0 * t;
  r.sum8 = 8.0 * sum;
  // Each r_i carries the rounding of t a_i and of the difference: below 2^-52 (|q_i| + t).
  r.two_r = 2.0 * (std::sqrt(r2) + kSlop * (std::sqrt(r.q2) + 16.0 * t)) * (1.0 + kSlop);
  r.gamma_scan = gamma(2 * D + 16);
  return r;
}

// A lower bound on ||q - s c||^2 from the kernel's exact dot = sum a_i (c_i + 8) (0 or below
// when it says nothing). Seven double roundings of results below `mag` and the rounding of
// q2 (D <= 256 terms): far below kSlop of mag.
inline double e_lo(const Query& q, std::int32_t dot, float scale, float c2, float norm) {
  const double s = scale;
  const double tac = q.two_t * (static_cast<double>(dot) - q.sum8);
  const double sc2 = s * c2;
  const double rn = q.two_r * norm;
  const double e = q.q2 + s * (sc2 - tac) - rn;
  const double mag = q.q2 + s * (sc2 + std::fabs(tac)) + rn;
  return e - kSlop * mag;
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
