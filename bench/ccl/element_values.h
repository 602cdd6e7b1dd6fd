// Inputs and expected results of giant-ccl-bench, for every ccl dtype.
//
// Inputs are small integers, so every reduction is exact in any order and
// results are checked with tolerance 0 (docs/reference/published-figures.md); only
// avg, a division, gets a rounding tolerance, and an allreduce with a wire
// dtype the bound that dtype states (ElementChecker::relative_error). The value depends on the rank,
// so a block delivered from or to the wrong rank is counted as wrong.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "giant/ccl/float16.h"
#include "giant/ccl/types.h"

namespace giant::bench {

using ccl::DType;
using ccl::ReduceOp;

inline void store_element(DType dtype, void* base, size_t index, double value) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(base)[index] = static_cast<float>(value); break;
    case DType::f64: static_cast<double*>(base)[index] = value; break;
    case DType::f16: static_cast<uint16_t*>(base)[index] = ccl::float_to_half(static_cast<float>(value)); break;
    case DType::bf16: static_cast<uint16_t*>(base)[index] = ccl::float_to_bfloat16(static_cast<float>(value)); break;
    case DType::i32: static_cast<int32_t*>(base)[index] = static_cast<int32_t>(value); break;
    case DType::i64: static_cast<int64_t*>(base)[index] = static_cast<int64_t>(value); break;
    case DType::u8: static_cast<uint8_t*>(base)[index] = static_cast<uint8_t>(value); break;
  }
}

inline double load_element(DType dtype, const void* base, size_t index) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(base)[index];
    case DType::f64: return static_cast<const double*>(base)[index];
    case DType::f16: return ccl::half_to_float(static_cast<const uint16_t*>(base)[index]);
    case DType::bf16: return ccl::bfloat16_to_float(static_cast<const uint16_t*>(base)[index]);
    case DType::i32: return static_cast<const int32_t*>(base)[index];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(base)[index]);
    case DType::u8: return static_cast<const uint8_t*>(base)[index];
  }
  return NAN;
}

// The input pattern: element `index` of `rank`'s buffer. Values are below 8
// (sums stay below 8 * nproc, exact in bf16 up to 32 ranks, in u8 up to 32);
// for prod they are 1 or 2, so products are powers of two (exact while the
// dtype holds 2^nproc). The pattern repeats every 8 elements.
class InputPattern {
 public:
  static constexpr size_t kPeriod = 8;

  // offset (not for prod) moves every value off the integers, so that a lossy
  // wire dtype really rounds; results are then checked against its bound.
  InputPattern(ReduceOp op, int nproc, double offset = 0) : op_(op), offset_(offset) {
    for (size_t phase = 0; phase < kPeriod; ++phase) {
      double sum = 0, prod = 1, low = INFINITY, high = -INFINITY, sum_abs = 0;
      for (int rank = 0; rank < nproc; ++rank) {
        double v = value(rank, phase);
        sum += v;
        prod *= v;
        low = std::fmin(low, v);
        high = std::fmax(high, v);
        sum_abs += std::fabs(v);
      }
      // What a compression bound is relative to: the sum of |inputs| (of the
      // mean's terms for avg; the product's magnitude for prod).
      magnitude_[phase] = op == ReduceOp::avg ? sum_abs / nproc : op == ReduceOp::prod ? std::fabs(prod) : sum_abs;
      switch (op) {
        case ReduceOp::sum: reduced_[phase] = sum; break;
        case ReduceOp::avg: reduced_[phase] = sum / nproc; break;
        case ReduceOp::prod: reduced_[phase] = prod; break;
        case ReduceOp::min: reduced_[phase] = low; break;
        case ReduceOp::max: reduced_[phase] = high; break;
      }
    }
  }

  double value(int rank, size_t index) const {
    size_t r = static_cast<size_t>(rank);
    if (op_ == ReduceOp::prod) return 1.0 + static_cast<double>((index + r) & 1);
    return static_cast<double>((index * 7 + r * 5) & 7) + offset_;
  }
  // The reduction over all ranks of element `index`.
  double reduced(size_t index) const { return reduced_[index % kPeriod]; }
  // The sum of |inputs| of element `index` (see the constructor).
  double magnitude(size_t index) const { return magnitude_[index % kPeriod]; }

 private:
  ReduceOp op_;
  double offset_ = 0;
  std::array<double, kPeriod> reduced_{};
  std::array<double, kPeriod> magnitude_{};
};

// Counts mismatches. Exact comparison, except avg (a division the library may
// do as a multiplication by 1/n): a few units in the last place of the dtype.
class ElementChecker {
 public:
  ElementChecker(DType dtype, ReduceOp op) : dtype_(dtype) {
    if (op == ReduceOp::avg) {
      relative_tolerance_ = dtype == DType::f64   ? 1e-14
                            : dtype == DType::f32 ? 1e-6
                            : dtype == DType::f16 ? 4e-3
                                                  : 3e-2;  // bf16
    }
  }
  bool matches(const void* base, size_t index, double expected) const {
    double got = load_element(dtype_, base, index);
    if (relative_tolerance_ == 0) return got == expected;
    return std::fabs(got - expected) <= relative_tolerance_ * std::fmax(1.0, std::fabs(expected));
  }
  // |got - expected| / magnitude, for a stated error bound such as a wire
  // dtype's (magnitude: InputPattern::magnitude); infinite for NaN.
  double relative_error(const void* base, size_t index, double expected, double magnitude) const {
    double error = std::fabs(load_element(dtype_, base, index) - expected);
    if (std::isnan(error)) return INFINITY;
    if (error == 0) return 0;
    return magnitude > 0 ? error / magnitude : INFINITY;
  }

 private:
  DType dtype_;
  double relative_tolerance_ = 0;
};

}  // namespace giant::bench
