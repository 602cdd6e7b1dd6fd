#include "giant/ccl/wire_compression.h"

#include <algorithm>

#include "giant/base/error.h"

namespace giant::ccl::detail {

namespace {

// Loops run in blocks of a fixed size, so that the vectorizer needs neither
// an epilogue nor alias checks (-O2's cheap cost model), with a scalar tail.
constexpr size_t kBlock = 16;

template <uint16_t (*Encode)(float)>
void encode_loop(const float* in, uint16_t* out, size_t count) {
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    uint16_t t[kBlock];
    for (size_t j = 0; j < kBlock; ++j) t[j] = Encode(in[i + j]);
    for (size_t j = 0; j < kBlock; ++j) out[i + j] = t[j];
  }
  for (; i < count; ++i) out[i] = Encode(in[i]);
}

template <float (*Decode)(uint16_t)>
void decode_loop(const uint16_t* in, float* out, size_t count) {
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    float t[kBlock];
    for (size_t j = 0; j < kBlock; ++j) t[j] = Decode(in[i + j]);
    for (size_t j = 0; j < kBlock; ++j) out[i + j] = t[j];
  }
  for (; i < count; ++i) out[i] = Decode(in[i]);
}

// Each block is read whole before it is written, so out == a is fine.
template <float (*Decode)(uint16_t), class F>
void decode_reduce_loop(float* out, const float* a, const uint16_t* in, size_t count, F f) {
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    float t[kBlock];
    for (size_t j = 0; j < kBlock; ++j) t[j] = f(a[i + j], Decode(in[i + j]));
    for (size_t j = 0; j < kBlock; ++j) out[i + j] = t[j];
  }
  for (; i < count; ++i) out[i] = f(a[i], Decode(in[i]));
}

// The operators exactly as reduce_into applies them to f32.
template <float (*Decode)(uint16_t)>
void decode_reduce_op(float* out, const float* a, const uint16_t* in, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: decode_reduce_loop<Decode>(out, a, in, count, [](float x, float y) { return x + y; }); break;
    case ReduceOp::prod: decode_reduce_loop<Decode>(out, a, in, count, [](float x, float y) { return x * y; }); break;
    case ReduceOp::min:
      decode_reduce_loop<Decode>(out, a, in, count, [](float x, float y) { return std::min(x, y); });
      break;
    case ReduceOp::max:
      decode_reduce_loop<Decode>(out, a, in, count, [](float x, float y) { return std::max(x, y); });
      break;
  }
}

[[noreturn]] void no_wire(WireDType wire) {
  throw Error(std::string("wire compression: no conversion for wire dtype ") + wire_dtype_name(wire));
}

}  // namespace

size_t wire_size(WireDType wire) { return wire == WireDType::none ? 0 : 2; }

void encode(WireDType wire, const float* in, uint16_t* out, size_t count) {
  switch (wire) {
    case WireDType::bf16: encode_loop<float_to_bfloat16>(in, out, count); return;
    case WireDType::fp16: encode_loop<float_to_half>(in, out, count); return;
    default: no_wire(wire);
  }
}

void decode(WireDType wire, const uint16_t* in, float* out, size_t count) {
  switch (wire) {
    case WireDType::bf16: decode_loop<bfloat16_to_float>(in, out, count); return;
    case WireDType::fp16: decode_loop<half_to_float>(in, out, count); return;
    default: no_wire(wire);
  }
}

void decode_reduce(WireDType wire, float* out, const float* a, const uint16_t* in, size_t count, ReduceOp op) {
  switch (wire) {
    case WireDType::bf16: decode_reduce_op<bfloat16_to_float>(out, a, in, count, op); return;
    case WireDType::fp16: decode_reduce_op<half_to_float>(out, a, in, count, op); return;
    default: no_wire(wire);
  }
}

void round_through(WireDType wire, float* data, uint16_t* encoded, size_t count) {
  encode(wire, data, encoded, count);
  decode(wire, encoded, data, count);
}

}  // namespace giant::ccl::detail
