// Wire compression kernels (internal): f32 <-> bf16 / fp16 by the codec of
// float16.h, and "decode and reduce" so that a receiver reduces straight
// from a received compressed segment.
#pragma once

#include <cstddef>
#include <cstdint>

#include "giant/ccl/collectives.h"
#include "giant/ccl/float16.h"
#include "giant/ccl/types.h"

namespace giant::ccl::detail {

// The wire's names for the conversions of float16.h.
inline uint16_t encode_bf16(float value) { return float_to_bfloat16(value); }
inline float decode_bf16(uint16_t bits) { return bfloat16_to_float(bits); }
inline uint16_t encode_fp16(float value) { return float_to_half(value); }
inline float decode_fp16(uint16_t bits) { return half_to_float(bits); }

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
