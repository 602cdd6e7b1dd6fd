#include "giant/ccl/reduce_kernels.h"

#include <algorithm>

#include "giant/base/error.h"

namespace giant::ccl {

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
