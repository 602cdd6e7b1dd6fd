#include "ccl/support/dtypes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace giant::ccl::test {

uint16_t half_bits_from_float(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf, or NaN (kept quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent >= -14) {  // a normal half
    const uint32_t mantissa = magnitude & 0x7fffffu;
    uint32_t half = (static_cast<uint32_t>(exponent + 15) << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  if (exponent < -25) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
  // Subnormal half: units of 2^-24. value = m * 2^(exponent - 23), m has 24 bits.
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  const int shift = -(exponent + 1);  // 14..24
  uint32_t half = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float float_from_half_bits(uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa ? std::nanf("") : INFINITY;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

uint16_t bfloat16_bits_from_float(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint64_t rounded = static_cast<uint64_t>(x) + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float float_from_bfloat16_bits(uint16_t bits) {
  const uint32_t x = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &x, 4);
  return out;
}

Buffer::Buffer(DType dtype, size_t count)
    : dtype_(dtype), count_(count), bytes_(count * dtype_size(dtype)) {}

double Buffer::get(size_t i) const {
  const uint8_t* p = bytes_.data() + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::f16: { uint16_t v; std::memcpy(&v, p, 2); return float_from_half_bits(v); }
    case DType::bf16: { uint16_t v; std::memcpy(&v, p, 2); return float_from_bfloat16_bits(v); }
    case DType::i32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::i64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::u8: return *p;
  }
  throw std::logic_error("unknown dtype");
}

void Buffer::set(size_t i, double value) {
  uint8_t* p = bytes_.data() + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::f32: { float v = static_cast<float>(value); std::memcpy(p, &v, 4); return; }
    case DType::f64: std::memcpy(p, &value, 8); return;
    case DType::f16: {
      uint16_t v = half_bits_from_float(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::bf16: {
      uint16_t v = bfloat16_bits_from_float(static_cast<float>(value));
      std::memcpy(p, &v, 2);
      return;
    }
    case DType::i32: { int32_t v = static_cast<int32_t>(std::llround(value)); std::memcpy(p, &v, 4); return; }
    case DType::i64: { int64_t v = std::llround(value); std::memcpy(p, &v, 8); return; }
    case DType::u8: *p = static_cast<uint8_t>(std::llround(value)); return;
  }
  throw std::logic_error("unknown dtype");
}

void Buffer::fill(const std::function<double(size_t)>& value_at) {
  for (size_t i = 0; i < count_; ++i) set(i, value_at(i));
}

void Buffer::fill_bytes(uint8_t byte) {
  if (!bytes_.empty()) std::memset(bytes_.data(), byte, bytes_.size());
}

double ulp(DType dtype, double value) {
  int precision = 0;  // significand bits, the implicit one included
  int min_exponent = 0;
  switch (dtype) {
    case DType::f32: precision = 24; min_exponent = -126; break;
    case DType::f64: precision = 53; min_exponent = -1022; break;
    case DType::f16: precision = 11; min_exponent = -14; break;
    case DType::bf16: precision = 8; min_exponent = -126; break;
    default: return 0.0;
  }
  int exponent = min_exponent;
  if (value != 0.0) exponent = std::max(min_exponent, std::ilogb(value));
  return std::ldexp(1.0, exponent - (precision - 1));
}

void Findings::add(std::string message) { messages_.push_back(std::move(message)); }

std::string Findings::text(size_t max_lines) const {
  std::ostringstream out;
  for (size_t i = 0; i < messages_.size() && i < max_lines; ++i) out << messages_[i] << "\n";
  if (messages_.size() > max_lines) out << "... and " << messages_.size() - max_lines << " more\n";
  return out.str();
}

namespace {

double round_to(DType dtype, double value) {
  switch (dtype) {
    case DType::f32: return static_cast<float>(value);
    case DType::f64: return value;
    case DType::f16: return float_from_half_bits(half_bits_from_float(static_cast<float>(value)));
    case DType::bf16:
      return float_from_bfloat16_bits(bfloat16_bits_from_float(static_cast<float>(value)));
    case DType::i32:
    case DType::i64:
    case DType::u8: return static_cast<double>(std::llround(value));
  }
  return value;
}

}  // namespace

void compare(const Buffer& got, size_t offset, size_t count,
             const std::function<double(size_t)>& expected, bool one_ulp, const std::string& context,
             Findings& findings) {
  size_t mismatches = 0;
  std::ostringstream first;
  for (size_t i = 0; i < count; ++i) {
    const double want = expected(i);
    const double have = got.get(offset + i);
    bool ok;
    if (one_ulp && is_floating(got.dtype())) {
      ok = std::fabs(have - want) <= ulp(got.dtype(), want);
    } else {
      const double rounded = round_to(got.dtype(), want);
      ok = have == rounded || (std::isnan(have) && std::isnan(rounded));
    }
    if (!ok) {
      if (mismatches == 0) {
        first.precision(17);
        first << "element " << i << " expected " << want << (one_ulp ? " (+-1 ulp)" : "")
              << " got " << have;
      }
      ++mismatches;
    }
  }
  if (mismatches) {
    findings.add(context + ": " + first.str() + " (" + std::to_string(mismatches) + " of " +
                 std::to_string(count) + " elements wrong)");
  }
}

void compare_untouched(const Buffer& got, size_t offset, size_t count, uint8_t sentinel,
                       const std::string& context, Findings& findings) {
  const size_t width = dtype_size(got.dtype());
  const uint8_t* p = got.bytes().data() + offset * width;
  for (size_t i = 0; i < count * width; ++i) {
    if (p[i] != sentinel) {
      findings.add(context + ": element " + std::to_string(i / width) +
                   " was written but should have been left alone");
      return;
    }
  }
}

int pattern(int rank, size_t index, uint32_t salt) {
  uint64_t h = static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull;
  h ^= (static_cast<uint64_t>(rank) + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= (static_cast<uint64_t>(salt) + 7) * 0x165667B19E3779F9ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<int>(h % 41);
}

double reduction_input(DType dtype, ReduceOp op, int rank, size_t index, uint32_t salt) {
  const int p = pattern(rank, index, salt);
  if (op == ReduceOp::prod) {
    if (dtype == DType::u8) return 1 + p % 2;
    static constexpr int kFactors[4] = {1, 2, -1, -2};
    return kFactors[p % 4];
  }
  return dtype == DType::u8 ? p : p - 20;
}

double reduction_expected(DType dtype, ReduceOp op, int nranks, size_t index, uint32_t salt) {
  double acc = reduction_input(dtype, op, 0, index, salt);
  for (int r = 1; r < nranks; ++r) {
    const double v = reduction_input(dtype, op, r, index, salt);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
      case ReduceOp::prod: acc *= v; break;
    }
  }
  return op == ReduceOp::avg ? acc / nranks : acc;
}

double movement_input(int rank, size_t index, uint32_t salt) {
  return pattern(rank, index, salt) + 41 * (rank % 5);
}

uint64_t fnv1a(const void* data, size_t nbytes) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < nbytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace giant::ccl::test
