#include "giant/ccl/grad_wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "giant/base/error.h"
#include "giant/ccl/float16.h"

namespace giant::ccl {
namespace {

constexpr size_t kGroup = 256;  // elements sharing one scale (int8, int4)

struct NamedWire {
  const char* name;
  GradWire wire;
};
constexpr NamedWire kWires[] = {{"none", GradWire::none},
                                 {"bf16", GradWire::bf16},
                                 {"int8", GradWire::int8},
                                 {"int4", GradWire::int4},
                                 {"powersgd:1", GradWire::powersgd1},
                                 {"powersgd:2", GradWire::powersgd2},
                                 {"powersgd:4", GradWire::powersgd4},
                                 {"powersgd:8", GradWire::powersgd8}};

int levels(GradWire wire) { return wire == GradWire::int8 ? 127 : 7; }

// Bytes of one group's values (without its scale).
size_t value_bytes(GradWire wire, size_t n) { return wire == GradWire::int8 ? n : (n + 1) / 2; }

// One group of n <= kGroup elements: acc = in + residual, quantized to
// integers of at most `levels` in magnitude.
void encode_group(GradWire wire, const float* in, float* residual, size_t n, uint8_t* out) {
  float acc[kGroup];
  float max_abs = 0;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    acc[i] = in[i] + residual[i];
    finite = finite && std::isfinite(acc[i]);
    max_abs = std::max(max_abs, std::fabs(acc[i]));
  }
  const int top = levels(wire);
  float scale = finite ? max_abs / static_cast<float>(top) : std::numeric_limits<float>::quiet_NaN();
  if (finite && !(scale > 0)) scale = 0;  // all zeros (or max_abs / top underflowed)
  std::memcpy(out, &scale, sizeof scale);
  uint8_t* values = out + sizeof scale;
  if (wire == GradWire::int4) std::memset(values, 0, value_bytes(wire, n));
  const float inverse = scale > 0 ? 1.0f / scale : 0.0f;  // NaN scale: every q is 0, decoded NaN
  for (size_t i = 0; i < n; ++i) {
    const int q = std::clamp(static_cast<int>(std::lrint(acc[i] * inverse)), -top, top);
    // What the decoder will compute, so the residual is exactly what was lost.
    residual[i] = finite ? acc[i] - static_cast<float>(q) * scale : 0.0f;
    if (wire == GradWire::int8) {
      values[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    } else {
      values[i / 2] |= static_cast<uint8_t>((q + 8) << (4 * (i % 2)));
    }
  }
}

void decode_group(GradWire wire, const uint8_t* in, size_t n, float* out, bool add) {
  float scale;
  std::memcpy(&scale, in, sizeof scale);
  const uint8_t* values = in + sizeof scale;
  for (size_t i = 0; i < n; ++i) {
    const int q = wire == GradWire::int8 ? static_cast<int8_t>(values[i]) : ((values[i / 2] >> (4 * (i % 2))) & 15) - 8;
    const float x = static_cast<float>(q) * scale;
    out[i] = add ? out[i] + x : x;
  }
}

}  // namespace

const char* grad_wire_name(GradWire wire) {
  for (const auto& w : kWires) {
    if (w.wire == wire) return w.name;
  }
  return "?";
}

std::vector<std::string> grad_wire_names() {
  std::vector<std::string> names;
  for (const auto& w : kWires) names.emplace_back(w.name);
  return names;
}

GradWire parse_grad_wire(const std::string& name) {
  for (const auto& w : kWires) {
    if (name == w.name) return w.wire;
  }
  std::string choices;
  for (const auto& w : kWires) choices += std::string(choices.empty() ? "" : ", ") + w.name;
  throw Error("unknown gradient wire format '" + name + "' (choices: " + choices + ")");
}

int low_rank_of(GradWire wire) {
  switch (wire) {
    case GradWire::powersgd1: return 1;
    case GradWire::powersgd2: return 2;
    case GradWire::powersgd4: return 4;
    case GradWire::powersgd8: return 8;
    default: return 0;
  }
}

bool is_elementwise(GradWire wire) { return wire != GradWire::none && low_rank_of(wire) == 0; }

size_t grad_wire_bytes(GradWire wire, size_t count) {
  GIANT_CHECK(low_rank_of(wire) == 0, grad_wire_name(wire), " has no bytes per element (a low-rank wire)");
  switch (wire) {
    case GradWire::none:
      return 0;
    case GradWire::bf16:
      return 2 * count;
    case GradWire::int8:
    case GradWire::int4: {
      const size_t groups = (count + kGroup - 1) / kGroup;
      const size_t full = count / kGroup, rest = count % kGroup;
      return groups * sizeof(float) + full * value_bytes(wire, kGroup) + value_bytes(wire, rest);
    }
    default:
      break;
  }
  return 0;
}

double grad_wire_ratio(GradWire wire) {
  if (wire == GradWire::none) return 1.0;
  return static_cast<double>(4 * kGroup * 64) / static_cast<double>(grad_wire_bytes(wire, kGroup * 64));
}

void encode_with_feedback(GradWire wire, const float* in, float* residual, size_t count, uint8_t* out) {
  GIANT_CHECK(is_elementwise(wire), "encode_with_feedback: ", grad_wire_name(wire), " is no elementwise codec");
  if (wire == GradWire::bf16) {
    for (size_t i = 0; i < count; ++i) {
      const float acc = in[i] + residual[i];
      const uint16_t bits = float_to_bfloat16(acc);
      std::memcpy(out + 2 * i, &bits, 2);
      residual[i] = std::isfinite(acc) ? acc - bfloat16_to_float(bits) : 0.0f;
    }
    return;
  }
  for (size_t start = 0; start < count; start += kGroup) {
    const size_t n = std::min(kGroup, count - start);
    encode_group(wire, in + start, residual + start, n, out);
    out += sizeof(float) + value_bytes(wire, n);
  }
}

void decode_grad_wire(GradWire wire, const uint8_t* in, size_t count, float* out, bool add) {
  GIANT_CHECK(is_elementwise(wire), "decode_grad_wire: ", grad_wire_name(wire), " is no elementwise codec");
  if (wire == GradWire::bf16) {
    for (size_t i = 0; i < count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, in + 2 * i, 2);
      const float x = bfloat16_to_float(bits);
      out[i] = add ? out[i] + x : x;
    }
    return;
  }
  for (size_t start = 0; start < count; start += kGroup) {
    const size_t n = std::min(kGroup, count - start);
    decode_group(wire, in, n, out + start, add);
    in += sizeof(float) + value_bytes(wire, n);
  }
}

}  // namespace giant::ccl
