// Storage dtypes of the KV cache, the ring and the summaries, with exact conversions.
//
// float -> bf16 and float -> fp16 round to nearest, ties to even, as the hardware converters
// (F16C, AVX-512 BF16, CUDA __float2bfloat16_rn / __float2half_rn) do; NaN stays NaN; values
// past the fp16 range become +-inf. Decoding is exact. Every bf16/fp16 value round-trips.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/config.h"
#include "kernels/enum_names.h"
#include "kernels/error.h"

namespace mactune {

enum class DType : std::uint8_t { f32, f16, bf16 };

constexpr std::size_t dtype_size(DType t) {
  return t == DType::f32 ? 4 : 2;
}

template <>
struct EnumNames<DType> {
  static constexpr std::string_view what = "dtype";
  // The usual spellings are accepted too: fp32/float32/float, fp16/float16/half, bfloat16.
  static constexpr EnumName<DType> names[] = {{DType::f32, "f32"},     {DType::f16, "f16"},
                                              {DType::bf16, "bf16"},   {DType::f32, "fp32"},
                                              {DType::f32, "float32"}, {DType::f32, "float"},
                                              {DType::f16, "fp16"},    {DType::f16, "float16"},
                                              {DType::f16, "half"},    {DType::bf16, "bfloat16"}};
};

constexpr std::string_view dtype_name(DType t) {
  return name_of(t);
}
inline DType parse_dtype(std::string_view s) {
  return parse_enum<DType>(s);
}

// 16-bit storage words. Plain structs so that host code never mixes them up with integers.
struct bf16_t {
  std::uint16_t bits;
};
struct f16_t {
  std::uint16_t bits;
};

MACTUNE_HD inline std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}
MACTUNE_HD inline float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

MACTUNE_HD inline bf16_t float_to_bf16(float f) {
  std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<std::uint16_t>(u >> 16)};
}
MACTUNE_HD inline float bf16_to_float(bf16_t h) {
  return bits_float(std::uint32_t{h.bits} << 16);
}

MACTUNE_HD inline f16_t float_to_f16(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};   // NaN
  if (a >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65520: inf
  const std::uint32_t e = a >> 23;
  if (a < 0x38800000u) {  // below 2^-14: an fp16 subnormal or zero, in units of 2^-24
    if (e < 102) return {static_cast<std::uint16_t>(sign)};
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14..24
    std::uint32_t q = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return {static_cast<std::uint16_t>(sign | q)};
  }
  std::uint32_t q = ((e - 112) << 10) | ((a & 0x7fffffu) >> 13);
  const std::uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;  // a carry into the exponent is right
  return {static_cast<std::uint16_t>(sign | q)};
}

MACTUNE_HD inline float f16_to_float(f16_t h) {
  const std::uint32_t sign = std::uint32_t{h.bits & 0x8000u} << 16;
  const std::uint32_t e = (h.bits >> 10) & 0x1fu;
  std::uint32_t m = h.bits & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));  // inf / NaN
  if (e != 0) return bits_float(sign | ((e + 112) << 23) | (m << 13));
  if (m == 0) return bits_float(sign);
  // Subnormal: normalize.
  std::uint32_t exp = 113;
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --exp;
  }
  return bits_float(sign | (exp << 23) | ((m & 0x3ffu) << 13));
}

// Storage traits: load/store one element as float.
MACTUNE_HD inline float to_float(float x) {
  return x;
}
MACTUNE_HD inline float to_float(bf16_t x) {
  return bf16_to_float(x);
}
MACTUNE_HD inline float to_float(f16_t x) {
  return f16_to_float(x);
}

template <class T>
MACTUNE_HD inline T from_float(float x);
template <>
MACTUNE_HD inline float from_float<float>(float x) {
  return x;
}
template <>
MACTUNE_HD inline bf16_t from_float<bf16_t>(float x) {
  return float_to_bf16(x);
}
template <>
MACTUNE_HD inline f16_t from_float<f16_t>(float x) {
  return float_to_f16(x);
}

// The value a double takes once stored as `t` (through float, as every engine converts).
inline double round_to(DType t, double x) {
  const float f = static_cast<float>(x);
  switch (t) {
    case DType::f32:
      return f;
    case DType::f16:
      return f16_to_float(float_to_f16(f));
    case DType::bf16:
      return bf16_to_float(float_to_bf16(f));
  }
  return f;
}

// Reads element i of a raw buffer stored as `t`.
inline float load_as_float(DType t, const void* base, std::size_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::f16:
      return f16_to_float(static_cast<const f16_t*>(base)[i]);
    case DType::bf16:
      return bf16_to_float(static_cast<const bf16_t*>(base)[i]);
  }
  return 0.0f;
}

// Writes element i of a raw buffer stored as `t`.
inline void store_from_float(DType t, void* base, std::size_t i, float x) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(base)[i] = x;
      return;
    case DType::f16:
      static_cast<f16_t*>(base)[i] = float_to_f16(x);
      return;
    case DType::bf16:
      static_cast<bf16_t*>(base)[i] = float_to_bf16(x);
      return;
  }
}

// Calls f(T{}) with T the storage type of `t`: the one runtime-to-template switch for dtypes.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32:
      return f(float{});
    case DType::f16:
      return f(f16_t{});
    case DType::bf16:
      return f(bf16_t{});
  }
  input_error("unsupported dtype ", static_cast<int>(t));
}

}  // namespace mactune
