// bf16 types and conversions of cuda_bf16.h as the simt build provides them (host code,
// bit-exact round-to-nearest-even conversions of kernels/dtype.h).
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

struct __nv_bfloat16 {
  std::uint16_t x;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return {mactune::float_to_bf16(f).bits};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  return mactune::bf16_to_float({h.x});
}
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return {__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
inline float __low2float(__nv_bfloat162 h) {
  return __bfloat162float(h.x);
}
inline float __high2float(__nv_bfloat162 h) {
  return __bfloat162float(h.y);
}
