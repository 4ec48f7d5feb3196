// The AVX-512 path (F + BW + VL, with AVX2/FMA/F16C): the kernel body over 16-lane __m512
// registers, in a target-attribute region like the AVX2 path; the session selects it only when
// cpuid reports the features, so the binary still runs on CPUs without AVX-512.
//
// bf16 rows are read 32 at a time and split by lane parity, as on AVX2; a tiled K column (16
// rows of one dimension) fills one register in memory order (load16).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 headers build results from _mm512_undefined_*(): false positives.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cpu/kernel_api.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif

namespace mactune::cpu::avx512 {
namespace {

#include "kernels/cpu/code_dots_x86.inl"

struct V {
  using reg = __m512;
  static constexpr int L = 16;

  static reg zero() { return _mm512_setzero_ps(); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, reg x) { _mm512_storeu_ps(p, x); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static float hsum(reg x) { return _mm512_reduce_add_ps(x); }
  static float hmax(reg x) { return _mm512_reduce_max_ps(x); }
  static __m256 fold(reg x) {  // lanes i and i + 8 added: 8 lanes
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
    return _mm256_add_ps(_mm512_castps512_ps256(x), hi);
  }
  // out[i] = sum of the lanes of acc[i], i < 8: fold to 256 bits, then the AVX2 tree.
  static void reduce8(const reg* acc, float* out) {
    const __m256 t0 = _mm256_hadd_ps(fold(acc[0]), fold(acc[1]));
    const __m256 t1 = _mm256_hadd_ps(fold(acc[2]), fold(acc[3]));
    const __m256 t2 = _mm256_hadd_ps(fold(acc[4]), fold(acc[5]));
    const __m256 t3 = _mm256_hadd_ps(fold(acc[6]), fold(acc[7]));
    const __m256 u0 = _mm256_hadd_ps(t0, t1);
    const __m256 u1 = _mm256_hadd_ps(t2, t3);
    const __m256 lo = _mm256_permute2f128_ps(u0, u1, 0x20);
    const __m256 hi = _mm256_permute2f128_ps(u0, u1, 0x31);
    _mm256_storeu_ps(out, _mm256_add_ps(lo, hi));
  }

  // 2^x for x <= 0, as on AVX2 (degree-7 polynomial on [-1/2, 1/2]); scalef applies 2^n.
  static reg exp2(reg x) {
    const __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_GE_OQ);
    x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
    const reg n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const reg f = _mm512_sub_ps(x, n);
    reg p = _mm512_set1_ps(1.5252733804059840e-5f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.5403530393381609e-4f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(p, n));
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
    a = _mm512_loadu_ps(p);
    b = _mm512_loadu_ps(p + L);
  }
  static void load_pair(const f16_t* p, reg& a, reg& b) {
    a = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    b = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + L)));
  }
  // 16 elements in memory order (a tiled K column).
  static reg load16(const float* p) { return _mm512_loadu_ps(p); }
  static reg load16(const f16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static reg load16(const bf16_t* p) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
  }
  static void load_pair(const bf16_t* p, reg& a, reg& b) {
    const __m512i x = _mm512_loadu_si512(p);
    a = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    b = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
};

#include "kernels/cpu/kernel_body.inl"

}  // namespace
}  // namespace mactune::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace mactune::cpu::avx512 {

#include "kernels/cpu/kernel_table.inl"

}  // namespace mactune::cpu::avx512
