// The portable path: the kernel body over 8-lane GCC/Clang vector extensions, compiled for the
// baseline target (SSE2 on x86-64; NEON or scalar elsewhere). Lane order is the memory order.
// V's 32-byte vectors cross no ABI boundary (internal linkage): the warning does not apply.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/cpu/kernel_api.h"

namespace mactune::cpu::generic {
namespace {

struct V {
  using reg = float __attribute__((vector_size(32)));
  using ireg = std::int32_t __attribute__((vector_size(32)));
  static constexpr int L = 8;

  static reg zero() { return reg{}; }
  static reg set1(float x) { return reg{} + x; }
  static reg load(const float* p) {
    reg r;
    std::memcpy(&r, p, sizeof r);
    return r;
  }
  static void store(float* p, reg x) { std::memcpy(p, &x, sizeof x); }
  static reg add(reg a, reg b) { return a + b; }
  static reg sub(reg a, reg b) { return a - b; }
  static reg mul(reg a, reg b) { return a * b; }
  static reg fma(reg a, reg b, reg c) { return a * b + c; }
  static reg select(ireg mask, reg a, reg b) {  // mask lanes are -1 (take a) or 0 (take b)
    return (reg)((mask & (ireg)a) | (~mask & (ireg)b));
  }
  static reg max(reg a, reg b) { return select(a > b, a, b); }
  static float hsum(reg x) {
    float s = 0.0f;
    for (int i = 0; i < L; ++i) s += x[i];
    return s;
  }
  static float hmax(reg x) {
    float m = x[0];
    for (int i = 1; i < L; ++i) m = m > x[i] ? m : x[i];
    return m;
  }
  static void reduce8(const reg* acc, float* out) {
    for (int i = 0; i < 8; ++i) out[i] = hsum(acc[i]);
  }

  // 2^x for x <= 0 (scores minus their running max): n = round(x), 2^(x - n) by a degree-7
  // Taylor polynomial on [-1/2, 1/2] (relative error < 1e-8), times 2^n built in the exponent
  // field. Exactly 0 below -126, -inf included.
  static reg exp2(reg x) {
    const ireg live = x >= -126.0f;
    x = max(x, set1(-126.0f));
    const reg y = x + 0.5f;
    ireg n = __builtin_convertvector(y, ireg);          // truncation toward 0
    n += __builtin_convertvector(n, reg) > y;           // -1 where that rounded up: floor(y)
    const reg f = x - __builtin_convertvector(n, reg);  // in [-1/2, 1/2]
    reg p = set1(1.5252733804059840e-5f);               // ln2^7 / 7!
    p = p * f + 1.5403530393381609e-4f;                 // ln2^6 / 6!
    p = p * f + 1.3333558146428443e-3f;                 // ln2^5 / 5!
    p = p * f + 9.6181291076284772e-3f;                 // ln2^4 / 4!
    p = p * f + 5.5504108664821580e-2f;                 // ln2^3 / 3!
    p = p * f + 2.4022650695910071e-1f;                 // ln2^2 / 2!
    p = p * f + 6.9314718055994531e-1f;                 // ln2
    p = p * f + 1.0f;
    const reg scale = (reg)((n + 127) << 23);
    return select(live, p * scale, reg{});
  }

  template <class T>
  static constexpr int pair_slot(int i) {
    return i;
  }
  template <class T>
  static void load_pair(const T* p, reg& a, reg& b) {
    for (int i = 0; i < L; ++i) {
      a[i] = widen(p[i]);
      b[i] = widen(p[L + i]);
    }
  }
  template <class U>
  static float widen(U x) {
    if constexpr (std::is_same_v<U, float>)
      return x;
    else
      return to_float(x);
  }
};

#include "kernels/cpu/kernel_body.inl"

}  // namespace

#include "kernels/cpu/kernel_table.inl"

}  // namespace mactune::cpu::generic
