// Gradient wire formats with error feedback: what data-parallel gradients
// travel in between hosts when they are compressed (host_compressed_allreduce.h).
//
// Each encode adds the caller's residual (what earlier encodes dropped) to
// its input, encodes the sum, and keeps what the encoding dropped as the new
// residual, so nothing of a gradient is lost, only delayed:
//   decode(encode(x + r)) + r' == x + r   (exactly, in f32).
// Sizes against f32 (4 bytes per element):
//   bf16  2 bytes per element (2x), round to nearest even;
//   int8  a group of 256 elements as one f32 scale and 256 signed bytes
//         (q = round(x / scale), scale = max|x| / 127): 3.94x;
//   int4  the same with 4-bit values (max|x| / 7), two per byte: 7.76x.
// A group holding a NaN or an infinity decodes to NaN (so the step's
// non-finite check sees it) and leaves no residual behind.
//
// powersgd:R (R = 1, 2, 4 or 8) is no elementwise codec: each gradient
// matrix is sent as a rank-R approximation (PowerSGD), which needs the
// matrices' shapes and products, so the data-parallel engine runs it
// (parallel/data_parallel/low_rank_wire.h); here it is only named.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace giant::ccl {

enum class GradWire : uint8_t { none, bf16, int8, int4, powersgd1, powersgd2, powersgd4, powersgd8 };
const char* grad_wire_name(GradWire wire);
// "none", "bf16", "int8", "int4" or "powersgd:R"; throws giant::Error
// naming the choices.
GradWire parse_grad_wire(const std::string& name);
// The choices, in order ("none", "bf16", ...).
std::vector<std::string> grad_wire_names();
// The rank R of powersgd:R; 0 for the elementwise codecs and none.
int low_rank_of(GradWire wire);
// bf16, int8 or int4: a codec of each element (encode/decode below).
bool is_elementwise(GradWire wire);
// f32 bytes over encoded bytes for a long run (1 for none); an elementwise
// codec's only (a low-rank wire's depends on the matrices).
double grad_wire_ratio(GradWire wire);

// Bytes `count` encoded elements take (0 for none; elementwise codecs only).
size_t grad_wire_bytes(GradWire wire, size_t count);
// out (grad_wire_bytes(wire, count) bytes) = encode(in + residual);
// residual = in + residual - decode(out). in and residual must not overlap.
void encode_with_feedback(GradWire wire, const float* in, float* residual, size_t count, uint8_t* out);
// out[i] (+)= decode(in)[i]; `add`: accumulate instead of overwrite.
void decode_grad_wire(GradWire wire, const uint8_t* in, size_t count, float* out, bool add);

}  // namespace giant::ccl
