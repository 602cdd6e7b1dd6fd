// The reduction kernels and 16-bit float conversions against plain references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "giant/ccl/reduce_kernels.h"

namespace giant::ccl {
namespace {

TEST(HalfConversion, RoundTripsEveryHalf) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = half_to_float(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    ASSERT_EQ(float_to_half(f), h) << "bits " << bits;
  }
}

TEST(HalfConversion, RoundsToNearestEven) {
  EXPECT_EQ(half_to_float(float_to_half(1.0f)), 1.0f);
  EXPECT_EQ(half_to_float(float_to_half(2049.0f)), 2048.0f);  // tie goes to even
  EXPECT_EQ(half_to_float(float_to_half(2051.0f)), 2052.0f);
  EXPECT_EQ(half_to_float(float_to_half(1e6f)), INFINITY);
  EXPECT_EQ(half_to_float(float_to_half(5.96046448e-8f)), 5.96046448e-8f);  // smallest subnormal
  EXPECT_EQ(half_to_float(float_to_half(-0.0f)), -0.0f);
}

TEST(Bfloat16Conversion, RoundTripsAndRounds) {
  for (uint32_t bits = 0; bits < 0x10000; bits += 7) {
    float f = bfloat16_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bfloat16(f), bits);
  }
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(257.0f)), 256.0f);  // tie to even
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(259.0f)), 260.0f);
}

template <class T>
std::vector<T> apply(const std::vector<T>& a, const std::vector<T>& b, DType dtype, ReduceOp op) {
  std::vector<T> out(a.size());
  reduce_into(out.data(), a.data(), b.data(), a.size(), dtype, op);
  return out;
}

TEST(ReduceInto, EveryOpOnIntegers) {
  std::vector<int32_t> a{1, -5, 7, 0}, b{3, 2, -7, 9};
  EXPECT_EQ(apply(a, b, DType::i32, ReduceOp::sum), (std::vector<int32_t>{4, -3, 0, 9}));
  EXPECT_EQ(apply(a, b, DType::i32, ReduceOp::prod), (std::vector<int32_t>{3, -10, -49, 0}));
  EXPECT_EQ(apply(a, b, DType::i32, ReduceOp::min), (std::vector<int32_t>{1, -5, -7, 0}));
  EXPECT_EQ(apply(a, b, DType::i32, ReduceOp::max), (std::vector<int32_t>{3, 2, 7, 9}));
  std::vector<uint8_t> c{200, 3}, d{55, 4};
  EXPECT_EQ(apply(c, d, DType::u8, ReduceOp::sum), (std::vector<uint8_t>{255, 7}));
}

TEST(ReduceInto, SixteenBitFloatsMatchFloatReference) {
  std::vector<uint16_t> a, b;
  for (int i = 0; i < 3000; ++i) {
    a.push_back(float_to_half(0.25f * static_cast<float>(i % 97) - 3.0f));
    b.push_back(float_to_half(0.5f * static_cast<float>(i % 31)));
  }
  auto sum = apply(a, b, DType::f16, ReduceOp::sum);
  auto mx = apply(a, b, DType::f16, ReduceOp::max);
  for (size_t i = 0; i < a.size(); ++i) {
    float x = half_to_float(a[i]), y = half_to_float(b[i]);
    ASSERT_EQ(sum[i], float_to_half(x + y));
    ASSERT_EQ(mx[i], float_to_half(std::max(x, y)));
  }
  std::vector<uint16_t> p{float_to_bfloat16(3.0f)}, q{float_to_bfloat16(4.0f)};
  EXPECT_EQ(bfloat16_to_float(apply(p, q, DType::bf16, ReduceOp::prod)[0]), 12.0f);
}

TEST(ReduceInto, AliasedOutputAndAverage) {
  std::vector<float> a{1, 2, 3}, b{5, 6, 7};
  reduce_into(a.data(), a.data(), b.data(), 3, DType::f32, ReduceOp::avg);
  finish_average(a.data(), 3, DType::f32, 2);
  EXPECT_EQ(a, (std::vector<float>{3, 4, 5}));
  std::vector<double> d{9};
  finish_average(d.data(), 1, DType::f64, 3);
  EXPECT_EQ(d[0], 3.0);
}

}  // namespace
}  // namespace giant::ccl
