// IEEE binary16 (fp16) and bfloat16 <-> float, round to nearest even: the
// one codec of the tree (reduce kernels, wire compression, the benchmarks).
// NaN stays NaN (quiet, sign and upper payload kept), inf stays inf, fp16
// overflow gives inf. Branch-free bit manipulation, so that loops over them
// vectorize.
#pragma once

#include <cstdint>
#include <cstring>

namespace giant::ccl {
namespace detail {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// cond ? a : b, as masks: the vectorizer takes nested selects only this way.
inline uint32_t select_bits(bool cond, uint32_t a, uint32_t b) {
  uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}

}  // namespace detail

inline uint16_t float_to_bfloat16(float value) {
  uint32_t x = detail::float_bits(value);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;  // a carry rounds into the exponent (inf)
  uint32_t nan = (x >> 16) | 0x40u;                             // quiet, upper payload kept
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float bfloat16_to_float(uint16_t bits) { return detail::bits_float(static_cast<uint32_t>(bits) << 16); }

inline uint16_t float_to_half(float value) {
  uint32_t x = detail::float_bits(value);
  uint32_t sign = x & 0x80000000u;
  uint32_t a = x ^ sign;
  // Below 2^-14 the result is subnormal: adding 0.5 puts the fp16 ulp (2^-24)
  // at the float's last bit, so the float adder rounds to nearest even.
  constexpr uint32_t kHalf = 126u << 23;
  uint32_t sub = detail::float_bits(detail::bits_float(a) + 0.5f) - kHalf;
  // Normal: rebias the exponent and round on the 13 dropped bits; a carry
  // goes into the exponent, up to inf from 65520 on.
  uint32_t norm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  uint32_t special = a > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN (quiet) or inf (from 65536 on)
  uint32_t h = detail::select_bits(a >= (143u << 23), special, detail::select_bits(a < (113u << 23), sub, norm));
  return static_cast<uint16_t>(h | (sign >> 16));
}

inline float half_to_float(uint16_t bits) {
  uint32_t h = bits;
  uint32_t rest = (h & 0x7fffu) << 13;
  uint32_t exponent = rest & (0x7c00u << 13);
  uint32_t normal = rest + (112u << 23);
  uint32_t special = rest + (224u << 23);  // inf/NaN: exponent 255, mantissa kept
  // Zero/subnormal: (mantissa + 2^-14 as a float) - 2^-14, exact.
  uint32_t sub = detail::float_bits(detail::bits_float(rest + (113u << 23)) - detail::bits_float(113u << 23));
  uint32_t finite = detail::select_bits(exponent == 0, sub, normal);
  uint32_t f = detail::select_bits(exponent == (0x7c00u << 13), special, finite);
  return detail::bits_float(f | ((h & 0x8000u) << 16));
}

}  // namespace giant::ccl
