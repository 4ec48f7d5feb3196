// The AVX2 + FMA + F16C path: the kernel body over 8-lane __m256 registers. Compiled with a
// target-attribute region (not -mavx2 for the whole file), so nothing here leaks into code
// that runs on other CPUs; the session calls it only when cpuid reports the features.
//
// bf16 rows are read 16 at a time and split by lane parity (even elements by a 16-bit shift,
// odd ones by a mask): two instructions, no shuffles. Queries and accumulators use the same
// even/odd order (V::pair_slot), which a dot product and an axpy do not see.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cpu/kernel_api.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace mactune::cpu::avx2 {
namespace {

#include "kernels/cpu/code_dots_x86.inl"

struct V {
  using reg = __m256;
  static constexpr int L = 8;

  static reg zero() { return _mm256_setzero_ps(); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, reg x) { _mm256_storeu_ps(p, x); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static float hsum(reg x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(reg x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // out[i] = sum of the lanes of acc[i], i < 8: a transpose-and-add tree.
  static void reduce8(const reg* acc, float* out) {
    const __m256 t0 = _mm256_hadd_ps(acc[0], acc[1]);
    const __m256 t1 = _mm256_hadd_ps(acc[2], acc[3]);
    const __m256 t2 = _mm256_hadd_ps(acc[4], acc[5]);
    const __m256 t3 = _mm256_hadd_ps(acc[6], acc[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1);  // [0 1 2 3 | 0 1 2 3] halves
    const __m256 u1 = _mm256_hadd_ps(t2, t3);  // [4 5 6 7 | 4 5 6 7] halves
    const __m256 lo = _mm256_permute2f128_ps(u0, u1, 0x20);
    const __m256 hi = _mm256_permute2f128_ps(u0, u1, 0x31);
    _mm256_storeu_ps(out, _mm256_add_ps(lo, hi));
  }

  // 2^x for x <= 0: n = round(x), 2^(x - n) by a degree-7 Taylor polynomial on [-1/2, 1/2]
  // (relative error < 1e-8 before rounding), times 2^n built in the exponent field; exactly 0
  // below -126 (masked rows arrive as -inf).
  static reg exp2(reg x) {
    const reg live = _mm256_cmp_ps(x, _mm256_set1_ps(-126.0f), _CMP_GE_OQ);
    x = _mm256_max_ps(x, _mm256_set1_ps(-126.0f));
    const reg n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const reg f = _mm256_sub_ps(x, n);
    reg p = _mm256_set1_ps(1.5252733804059840e-5f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393381609e-4f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076284772e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108664821580e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650695910071e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718055994531e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(live, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
  }

  // The pruned match's integer dot products (code_dots_x86.inl).
  template <int H>
  static void code_dots(const std::int8_t* q, const std::uint8_t* codes, int slots,
                        std::int32_t* dot) {
    code_dots_256<H>(q, codes, slots, dot);
  }

  template <class T>
  static constexpr int pair_slot(int i) {
    if constexpr (std::is_same_v<T, bf16_t>)
      return (i & 1) ? L + i / 2 : i / 2;
    else
      return i;
  }
  static void load_pair(const float* p, reg& a, reg& b) {
    a = _mm256_loadu_ps(p);
    b = _mm256_loadu_ps(p + L);
  }
  static void load_pair(const f16_t* p, reg& a, reg& b) {
    a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + L)));
  }
  // The inverse of the bf16 split: a holds elements 0, 2, .. 14 and b 1, 3, .. 15 of a 16-element
  // block; afterwards a holds 0..7 and b 8..15.
  static void unpair(reg& a, reg& b) {
    const __m256 lo = _mm256_unpacklo_ps(a, b);  // 0 1 2 3 | 8 9 10 11
    const __m256 hi = _mm256_unpackhi_ps(a, b);  // 4 5 6 7 | 12 13 14 15
    a = _mm256_permute2f128_ps(lo, hi, 0x20);
    b = _mm256_permute2f128_ps(lo, hi, 0x31);
  }
  static void load_pair(const bf16_t* p, reg& a, reg& b) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    a = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    b = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
};

#include "kernels/cpu/kernel_body.inl"

}  // namespace
}  // namespace mactune::cpu::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace mactune::cpu::avx2 {

#include "kernels/cpu/kernel_table.inl"

}  // namespace mactune::cpu::avx2
