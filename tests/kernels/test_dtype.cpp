// Storage conversions: exact round trips, round-to-nearest-even, specials.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/dtype.h"

namespace mactune {
namespace {

// Nearest representable value by brute force over the sorted finite positives of a 16-bit format.
template <class Decode>
float nearest_even(float x, Decode decode, std::uint16_t max_finite_bits, float overflow_at) {
  const float a = std::fabs(x);
  if (a >= overflow_at) return std::copysign(INFINITY, x);
  std::vector<std::pair<float, std::uint16_t>> v;
  for (std::uint32_t b = 0; b <= max_finite_bits; ++b)
    v.emplace_back(decode(static_cast<std::uint16_t>(b)), static_cast<std::uint16_t>(b));
  auto hi = std::lower_bound(v.begin(), v.end(), std::make_pair(a, std::uint16_t{0}));
  if (hi == v.end()) return std::copysign(v.back().first, x);
  if (hi->first == a || hi == v.begin()) return std::copysign(hi->first, x);
  auto lo = hi - 1;
  const float dl = a - lo->first, dh = hi->first - a;
  float r = dl < dh ? lo->first : dh < dl ? hi->first : ((lo->second & 1) ? hi->first : lo->first);
  return std::copysign(r, x);
}

TEST(DType, EveryBf16RoundTrips) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const bf16_t h{static_cast<std::uint16_t>(b)};
    const float f = bf16_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
      continue;
    }
    EXPECT_EQ(float_to_bf16(f).bits, h.bits) << b;
  }
}

TEST(DType, EveryF16RoundTrips) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const f16_t h{static_cast<std::uint16_t>(b)};
    const float f = f16_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f))));
      continue;
    }
    EXPECT_EQ(float_to_f16(f).bits, h.bits) << b;
  }
}

TEST(DType, F16RoundsToNearestEven) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-27, 17);
  auto dec = [](std::uint16_t b) { return f16_to_float(f16_t{b}); };
  for (int i = 0; i < 4000; ++i) {
    const float x = std::ldexp(mant(rng), ex(rng)) * (i % 2 ? -1.0f : 1.0f);
    EXPECT_EQ(f16_to_float(float_to_f16(x)), nearest_even(x, dec, 0x7bff, 65520.0f)) << x;
  }
  // Ties: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 and goes to the even one (1).
  EXPECT_EQ(f16_to_float(float_to_f16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(f16_to_float(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11))),
            1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(f16_to_float(float_to_f16(std::ldexp(1.0f, -25))), 0.0f);  // tie to even zero
  EXPECT_EQ(f16_to_float(float_to_f16(std::ldexp(1.5f, -25))), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_float(float_to_f16(65520.0f))));
  EXPECT_EQ(f16_to_float(float_to_f16(65519.0f)), 65504.0f);
}

TEST(DType, Bf16RoundsToNearestEven) {
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-30, 30);
  for (int i = 0; i < 4000; ++i) {
    const float x = std::ldexp(mant(rng), ex(rng));
    const float r = bf16_to_float(float_to_bf16(x));
    const float ulp = std::ldexp(1.0f, std::ilogb(x) - 7);
    EXPECT_LE(std::fabs(r - x), 0.5f * ulp) << x;
  }
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);  // tie to even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(INFINITY))));
}

TEST(DType, ParsesNamesAndRefusesOthers) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("fp16"), DType::f16);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_THROW(parse_dtype("int8"), InputError);
  EXPECT_EQ(round_to(DType::bf16, 1.0 + 1.0 / 512), 1.0);
}

}  // namespace
}  // namespace mactune
