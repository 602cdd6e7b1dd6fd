#include "giant/ccl/reduce_kernels.h"

#include <algorithm>
#include <cstring>

#include "giant/base/error.h"

namespace giant::ccl {

uint16_t float_to_half(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exponent = (x >> 23) & 0xffu;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  int e = static_cast<int>(exponent) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // subnormal half (or zero)
    if (e < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry rounds into the exponent
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      int shifts = -1;
      do {
        ++shifts;
        mantissa <<= 1;
      } while (!(mantissa & 0x400u));
      bits = sign | (static_cast<uint32_t>(127 - 15 - shifts) << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

uint16_t float_to_bfloat16(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_to_float(uint16_t bits) {
  uint32_t x = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &x, 4);
  return out;
}

namespace {

template <class T, class F>
void apply(void* out, const void* a, const void* b, size_t count, F f) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = f(x[i], y[i]);
}

template <class T>
void reduce_typed(void* out, const void* a, const void* b, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: apply<T>(out, a, b, count, [](T x, T y) { return static_cast<T>(x + y); }); break;
    case ReduceOp::prod: apply<T>(out, a, b, count, [](T x, T y) { return static_cast<T>(x * y); }); break;
    case ReduceOp::min: apply<T>(out, a, b, count, [](T x, T y) { return std::min(x, y); }); break;
    case ReduceOp::max: apply<T>(out, a, b, count, [](T x, T y) { return std::max(x, y); }); break;
  }
}

// 16-bit floats: widen, reduce, round back, in blocks that stay in cache.
template <uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
void reduce_16(void* out, const void* a, const void* b, size_t count, ReduceOp op) {
  constexpr size_t kBlock = 1024;
  float fa[kBlock], fb[kBlock];
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t start = 0; start < count; start += kBlock) {
    size_t n = std::min(kBlock, count - start);
    for (size_t i = 0; i < n; ++i) {
      fa[i] = Widen(x[start + i]);
      fb[i] = Widen(y[start + i]);
    }
    reduce_typed<float>(fa, fa, fb, n, op);
    for (size_t i = 0; i < n; ++i) o[start + i] = Narrow(fa[i]);
  }
}

}  // namespace

void reduce_into(void* out, const void* a, const void* b, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::f32: reduce_typed<float>(out, a, b, count, op); break;
    case DType::f64: reduce_typed<double>(out, a, b, count, op); break;
    case DType::i32: reduce_typed<int32_t>(out, a, b, count, op); break;
    case DType::i64: reduce_typed<int64_t>(out, a, b, count, op); break;
    case DType::u8: reduce_typed<uint8_t>(out, a, b, count, op); break;
    case DType::f16: reduce_16<float_to_half, half_to_float>(out, a, b, count, op); break;
    case DType::bf16: reduce_16<float_to_bfloat16, bfloat16_to_float>(out, a, b, count, op); break;
  }
}

void finish_average(void* data, size_t count, DType dtype, int n) {
  GIANT_CHECK(is_floating(dtype), "avg needs a floating dtype, got ", dtype_name(dtype));
  switch (dtype) {
    case DType::f32: {
      float* p = static_cast<float*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= static_cast<float>(n);
      break;
    }
    case DType::f64: {
      double* p = static_cast<double*>(data);
      for (size_t i = 0; i < count; ++i) p[i] /= n;
      break;
    }
    case DType::f16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) p[i] = float_to_half(half_to_float(p[i]) / static_cast<float>(n));
      break;
    }
    case DType::bf16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) {
        p[i] = float_to_bfloat16(bfloat16_to_float(p[i]) / static_cast<float>(n));
      }
      break;
    }
    default: break;
  }
}

}  // namespace giant::ccl
