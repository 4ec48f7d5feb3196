// fp16 types and conversions of cuda_fp16.h as the simt build provides them (host code,
// bit-exact round-to-nearest-even conversions of kernels/dtype.h).
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

struct __half {
  std::uint16_t x;
};
struct alignas(4) __half2 {
  __half x, y;
};
inline __half __float2half_rn(float f) {
  return {mactune::float_to_f16(f).bits};
}
inline float __half2float(__half h) {
  return mactune::f16_to_float({h.x});
}
inline __half2 __floats2half2_rn(float a, float b) {
  return {__float2half_rn(a), __float2half_rn(b)};
}
inline float __low2float(__half2 h) {
  return __half2float(h.x);
}
inline float __high2float(__half2 h) {
  return __half2float(h.y);
}
