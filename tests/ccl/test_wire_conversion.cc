// Wire compression's conversions: the f32 <-> bf16/fp16 kernels against a
// plain scalar reference written from the formats' definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "giant/ccl/reduce_kernels.h"
#include "giant/ccl/wire_compression.h"

namespace giant::ccl::test {
namespace {

using detail::decode_bf16;
using detail::decode_fp16;
using detail::encode_bf16;
using detail::encode_fp16;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ------------------------------------------------ scalar reference (doubles)

// A 16-bit binary format: precision in bits (with the implicit one), the
// smallest normal exponent and the exponent bias.
struct Format {
  int precision;
  int emin;
  int emax;
  int bias;
  int mbits() const { return precision - 1; }
  uint32_t emask() const { return (1u << (15 - mbits())) - 1; }
};
constexpr Format kBf16{8, -126, 127, 127};
constexpr Format kFp16{11, -14, 15, 15};

double ref_decode(uint16_t code, const Format& f) {
  const uint32_t e = (code >> f.mbits()) & f.emask(), m = code & ((1u << f.mbits()) - 1);
  double v;
  if (e == f.emask()) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) v = std::ldexp(m, f.emin - f.mbits());
  else v = std::ldexp(m + (1u << f.mbits()), static_cast<int>(e) - f.bias - f.mbits());
  return (code & 0x8000) ? -v : v;
}

// Round to nearest even, written from the definition: scale to an integer
// number of quanta, nearbyint (ties to even), overflow past 2^(emax+1) to inf.
uint16_t ref_encode(float x, const Format& f) {
  const uint16_t sign = static_cast<uint16_t>((bits_of(x) >> 31) << 15);
  const uint16_t inf = static_cast<uint16_t>(sign | (f.emask() << f.mbits()));
  if (std::isinf(x)) return inf;
  double a = std::fabs(static_cast<double>(x));
  if (a == 0) return sign;
  int E;
  std::frexp(a, &E);
  int e = std::max(E - 1, f.emin);
  double quantum = std::ldexp(1.0, e - f.mbits());
  double v = std::nearbyint(a / quantum) * quantum;
  if (v >= std::ldexp(1.0, f.emax + 1)) return inf;
  if (v < std::ldexp(1.0, f.emin)) return static_cast<uint16_t>(sign | static_cast<uint32_t>(v / quantum));
  std::frexp(v, &E);
  e = E - 1;
  uint32_t m = static_cast<uint32_t>(v / std::ldexp(1.0, e - f.mbits())) - (1u << f.mbits());
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e + f.bias) << f.mbits()) | m);
}

// One float through both formats: the kernels against the reference and the
// existing helpers of reduce_kernels.h (NaN: still NaN, same bits as those).
// Returns what went wrong, or an empty string.
std::string encode_problem(float x) {
  uint16_t b = encode_bf16(x), h = encode_fp16(x);
  bool ok = b == float_to_bfloat16(x) && h == float_to_half(x);
  if (ok && std::isnan(x)) ok = std::isnan(decode_bf16(b)) && std::isnan(decode_fp16(h));
  if (ok && !std::isnan(x)) ok = b == ref_encode(x, kBf16) && h == ref_encode(x, kFp16);
  if (ok) return "";
  char text[200];
  std::snprintf(text, sizeof(text), "x=%.9g (0x%08x): bf16 0x%04x (helper 0x%04x, reference 0x%04x), "
                "fp16 0x%04x (helper 0x%04x, reference 0x%04x)", x, bits_of(x), b, float_to_bfloat16(x),
                ref_encode(x, kBf16), h, float_to_half(x), ref_encode(x, kFp16));
  return text;
}
void check_encode(float x) { ASSERT_EQ(encode_problem(x), ""); }

TEST(WireConversion, DecodesEveryCode) {
  std::vector<uint16_t> codes(0x10000);
  for (uint32_t c = 0; c < 0x10000; ++c) codes[c] = static_cast<uint16_t>(c);
  std::vector<float> bf(codes.size()), fp(codes.size());
  detail::decode(WireDType::bf16, codes.data(), bf.data(), codes.size());
  detail::decode(WireDType::fp16, codes.data(), fp.data(), codes.size());
  for (uint32_t c = 0; c < 0x10000; ++c) {
    SCOPED_TRACE(testing::Message() << "code 0x" << std::hex << c);
    uint16_t code = static_cast<uint16_t>(c);
    ASSERT_EQ(bits_of(decode_bf16(code)), bits_of(bfloat16_to_float(code)));
    ASSERT_EQ(bits_of(decode_fp16(code)), bits_of(half_to_float(code)));
    ASSERT_EQ(bits_of(bf[c]), bits_of(decode_bf16(code)));
    ASSERT_EQ(bits_of(fp[c]), bits_of(decode_fp16(code)));
    for (auto [value, format] : {std::pair{bf[c], kBf16}, std::pair{fp[c], kFp16}}) {
      double ref = ref_decode(code, format);
      if (std::isnan(ref)) {
        ASSERT_TRUE(std::isnan(value));
      } else {
        ASSERT_EQ(static_cast<double>(value), ref);
        ASSERT_EQ(std::signbit(value), std::signbit(ref));
      }
      // Every non-NaN code survives a round trip.
      if (!std::isnan(value)) {
        ASSERT_EQ(ref_encode(value, format), code);
      }
    }
  }
}

TEST(WireConversion, EncodesEdgeCases) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // bf16: ulp of 1 is 2^-7, so 1 + 2^-8 is a tie (to even: 1), 1 + 3*2^-8 a tie up.
  EXPECT_EQ(encode_bf16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(encode_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(encode_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // just above the tie
  EXPECT_EQ(encode_bf16(1.0f + 0x1p-8f - 0x1p-20f), 0x3f80);  // just below
  EXPECT_EQ(encode_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the largest bf16
  EXPECT_EQ(encode_bf16(-inf), 0xff80);
  EXPECT_EQ(encode_bf16(from_bits(0x00008000u)), 0x0000);  // f32 subnormal tie to even
  EXPECT_EQ(encode_bf16(from_bits(0x00018000u)), 0x0002);
  EXPECT_EQ(encode_bf16(from_bits(0x00008001u)), 0x0001);
  EXPECT_EQ(encode_bf16(from_bits(0x007fffffu)), 0x0080);  // up to the smallest normal
  EXPECT_EQ(encode_bf16(-0.0f), 0x8000);
  // fp16: ulp of 1 is 2^-10.
  EXPECT_EQ(encode_fp16(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(encode_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(encode_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(encode_fp16(65519.996f), 0x7bff);
  EXPECT_EQ(encode_fp16(65520.0f), 0x7c00);  // the tie above the largest half goes to inf
  EXPECT_EQ(encode_fp16(1e6f), 0x7c00);
  EXPECT_EQ(encode_fp16(-1e6f), 0xfc00);
  EXPECT_EQ(encode_fp16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(encode_fp16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(encode_fp16(0x1p-25f), 0x0000);  // tie to even: zero
  EXPECT_EQ(encode_fp16(0x1p-25f + 0x1p-40f), 0x0001);
  EXPECT_EQ(encode_fp16(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(encode_fp16(0x1p-14f), 0x0400);                // smallest normal
  EXPECT_EQ(encode_fp16(0x1p-14f - 0x1p-25f), 0x0400);     // tie between 0x3ff and 0x400: even
  EXPECT_EQ(encode_fp16(0x1p-14f - 3 * 0x1p-25f), 0x03fe);  // 1022.5 quanta: tie to even
  EXPECT_EQ(encode_fp16(0x1p-14f - 0x1p-24f), 0x03ff);      // the largest subnormal
  EXPECT_EQ(encode_fp16(from_bits(1)), 0x0000);            // f32 subnormals vanish
  EXPECT_EQ(encode_fp16(-from_bits(1)), 0x8000);
  EXPECT_EQ(encode_fp16(-inf), 0xfc00);
  EXPECT_EQ(encode_fp16(nan) & 0x7fff, 0x7e00);
  for (uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fc00001u, 0xff812345u}) {
    float x = from_bits(nan_bits);
    EXPECT_TRUE(std::isnan(decode_bf16(encode_bf16(x)))) << std::hex << nan_bits;
    EXPECT_TRUE(std::isnan(decode_fp16(encode_fp16(x)))) << std::hex << nan_bits;
    EXPECT_EQ(encode_bf16(x) >> 15, nan_bits >> 31);
    EXPECT_EQ(encode_fp16(x) >> 15, nan_bits >> 31);
  }
  std::vector<float> edges = {0.0f, -0.0f, inf, -inf, nan, -nan, 1.0f, -1.0f, 65504.0f, 65519.996f, 65520.0f,
                              65536.0f, 1e6f, std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                              0x1p-24f, 0x1p-25f, 3 * 0x1p-25f, 0x1p-14f, 0x1p-14f - 0x1p-25f};
  for (uint32_t b : {0x00008000u, 0x00018000u, 0x007fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x7f800001u, 0x33000000u,
                     0x33000001u, 0x477ff000u, 0x477fefffu, 0x38800000u, 0x387fe000u}) {
    edges.push_back(from_bits(b));
  }
  // Every tie and its neighbours in both formats, over a range of exponents.
  for (int e = -30; e <= 20; ++e) {
    for (uint32_t m : {0x8000u, 0x18000u, 0x7f8000u, 0x1000u, 0x3000u, 0x7ff000u}) {
      uint32_t base = (static_cast<uint32_t>(e + 127) << 23) | m;
      for (uint32_t d : {0u, 1u, 0xffffffffu}) {
        edges.push_back(from_bits(base + d));
        edges.push_back(-from_bits(base + d));
      }
    }
  }
  for (float x : edges) check_encode(x);
  std::vector<float> in = edges;
  std::vector<uint16_t> b(in.size()), h(in.size());
  detail::encode(WireDType::bf16, in.data(), b.data(), in.size());
  detail::encode(WireDType::fp16, in.data(), h.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(b[i], encode_bf16(in[i])) << i;
    EXPECT_EQ(h[i], encode_fp16(in[i])) << i;
  }
}

TEST(WireConversion, EncodesRandomAndSweptBitsLikeTheReference) {
  std::mt19937 rng(7);
  for (uint64_t i = 0; i < (uint64_t{1} << 32); i += 4099) check_encode(from_bits(static_cast<uint32_t>(i)));
  for (int i = 0; i < 500000; ++i) check_encode(from_bits(static_cast<uint32_t>(rng())));
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  for (int i = 0; i < 200000; ++i) check_encode(uniform(rng));
  // The array kernels on the same kind of data.
  std::vector<float> x(100003);
  for (auto& v : x) v = from_bits(static_cast<uint32_t>(rng()));
  std::vector<uint16_t> b(x.size()), h(x.size());
  detail::encode(WireDType::bf16, x.data(), b.data(), x.size());
  detail::encode(WireDType::fp16, x.data(), h.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(b[i], float_to_bfloat16(x[i])) << i;
    ASSERT_EQ(h[i], float_to_half(x[i])) << i;
  }
}

// The array kernels (blocked loops with a scalar tail) against scalar loops,
// at every length up to a few blocks and from unaligned starts.
TEST(WireConversion, ArrayKernelsMatchScalarLoops) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> a(1100), x(1100);
  for (auto& v : a) v = uniform(rng);
  for (auto& v : x) v = uniform(rng);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e6f, 1e-30f};
  for (size_t i = 0; i < 7; ++i) {
    a[100 + 13 * i] = specials[i];
    x[150 + 17 * i] = specials[i];
  }
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 50; ++n) lengths.push_back(n);
  lengths.push_back(1000);
  for (WireDType wire : {WireDType::bf16, WireDType::fp16}) {
    auto enc = wire == WireDType::bf16 ? encode_bf16 : encode_fp16;
    auto dec = wire == WireDType::bf16 ? decode_bf16 : decode_fp16;
    std::vector<uint16_t> w(x.size());
    for (size_t i = 0; i < x.size(); ++i) w[i] = enc(x[i]);
    for (size_t start : {0, 1, 3}) {
      for (size_t n : lengths) {
        SCOPED_TRACE(testing::Message() << wire_dtype_name(wire) << " start " << start << " n " << n);
        std::vector<uint16_t> e(n + 2, 0xabcd);
        detail::encode(wire, x.data() + start, e.data() + 1, n);
        ASSERT_EQ(e[0], 0xabcd);
        ASSERT_EQ(e[n + 1], 0xabcd);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(e[i + 1], w[start + i]);
        std::vector<float> d(n);
        detail::decode(wire, w.data() + start, d.data(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(bits_of(d[i]), bits_of(dec(w[start + i])));
        std::vector<float> r(x.begin() + start, x.begin() + start + n);
        std::vector<uint16_t> re(n);
        detail::round_through(wire, r.data(), re.data(), n);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(re[i], w[start + i]);
          ASSERT_EQ(bits_of(r[i]), bits_of(dec(w[start + i])));
        }
        for (ReduceOp op : kAllReduceOps) {
          auto f = [op](float p, float q) {
            switch (op) {
              case ReduceOp::sum:
              case ReduceOp::avg: return p + q;
              case ReduceOp::prod: return p * q;
              case ReduceOp::min: return std::min(p, q);
              case ReduceOp::max: return std::max(p, q);
            }
            return p;
          };
          std::vector<float> out(n), in_place(a.begin() + start, a.begin() + start + n);
          detail::decode_reduce(wire, out.data(), a.data() + start, w.data() + start, n, op);
          detail::decode_reduce(wire, in_place.data(), in_place.data(), w.data() + start, n, op);
          for (size_t i = 0; i < n; ++i) {
            uint32_t want = bits_of(f(a[start + i], dec(w[start + i])));
            ASSERT_EQ(bits_of(out[i]), want) << reduce_op_name(op) << " i " << i;
            ASSERT_EQ(bits_of(in_place[i]), want) << reduce_op_name(op) << " i " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace giant::ccl::test
