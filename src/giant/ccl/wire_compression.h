// Wire compression kernels (internal): f32 <-> bf16 / fp16 with round to
// nearest even, and "decode and reduce" so that a receiver reduces straight
// from a received compressed segment. The scalar conversions are branch-free
// bit manipulation, so the loops in wire_compression.cc vectorize; they agree
// bit for bit with float_to_bfloat16 / float_to_half (reduce_kernels.h), NaN
// payloads included: NaN stays NaN, inf stays inf, fp16 overflow gives inf.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "giant/ccl/collectives.h"
#include "giant/ccl/types.h"

namespace giant::ccl::detail {

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

inline uint16_t encode_bf16(float value) {
  uint32_t x = float_bits(value);
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;  // a carry rounds into the exponent (inf)
  uint32_t nan = (x >> 16) | 0x40u;                             // quiet, upper payload kept
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float decode_bf16(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

inline uint16_t encode_fp16(float value) {
  uint32_t x = float_bits(value);
  uint32_t sign = x & 0x80000000u;
  uint32_t a = x ^ sign;
  // Below 2^-14 the result is subnormal: adding 0.5 puts the fp16 ulp (2^-24)
  // at the float's last bit, so the float adder rounds to nearest even.
  constexpr uint32_t kHalf = 126u << 23;
  uint32_t sub = float_bits(bits_float(a) + 0.5f) - kHalf;
  // Normal: rebias the exponent and round on the 13 dropped bits; a carry
  // goes into the exponent, up to inf from 65520 on.
  uint32_t norm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  uint32_t special = a > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN (quiet) or inf (from 65536 on)
  uint32_t h = select_bits(a >= (143u << 23), special, select_bits(a < (113u << 23), sub, norm));
  return static_cast<uint16_t>(h | (sign >> 16));
}

inline float decode_fp16(uint16_t bits) {
  uint32_t h = bits;
  uint32_t rest = (h & 0x7fffu) << 13;
  uint32_t exponent = rest & (0x7c00u << 13);
  uint32_t normal = rest + (112u << 23);
  uint32_t special = rest + (224u << 23);  // inf/NaN: exponent 255, mantissa kept
  // Zero/subnormal: (mantissa + 2^-14 as a float) - 2^-14, exact.
  uint32_t sub = float_bits(bits_float(rest + (113u << 23)) - bits_float(113u << 23));
  uint32_t f = select_bits(exponent == (0x7c00u << 13), special, select_bits(exponent == 0, sub, normal));
  return bits_float(f | ((h & 0x8000u) << 16));
}

// Bytes per element in `wire` (0 for none).
size_t wire_size(WireDType wire);

// out[i] = wire(in[i]) / in[i] = f32(wire[i]). none is an error.
void encode(WireDType wire, const float* in, uint16_t* out, size_t count);
void decode(WireDType wire, const uint16_t* in, float* out, size_t count);
// out[i] = op(a[i], decode(in[i])); avg reduces as sum. out may equal a
// (out[i] = op(out[i], decode(in[i]))) but not overlap it otherwise.
void decode_reduce(WireDType wire, float* out, const float* a, const uint16_t* in, size_t count, ReduceOp op);
// encoded[i] = wire(data[i]), then data[i] = f32(encoded[i]): what the owner
// of a block does, so that its copy equals everyone else's.
void round_through(WireDType wire, float* data, uint16_t* encoded, size_t count);

}  // namespace giant::ccl::detail
