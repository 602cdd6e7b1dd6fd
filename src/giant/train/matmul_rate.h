// The FLOP rate MFU is measured against: a 1024 x 1024 x 1024 matrix
// product in the dtype the run computes in, on the threads the run uses,
// measured at start-up.
#pragma once

#include <cstdint>

#include "giant/base/precision.h"

namespace giant::train {

// Median FLOP/s (2 m n k per product) of an [m, k] x [k, n] product in
// `precision`, timed at least `min_repetitions` times and for at least
// `min_seconds` in all, after one warm-up: a bf16 product of a few
// milliseconds needs many runs for a median that a busy neighbour core does
// not sway. Error when the device has no matrix product in that dtype.
double measure_gemm_flops(int64_t m, int64_t n, int64_t k, Precision precision, int min_repetitions = 5,
                          double min_seconds = 0.25);

// MFU's reference: the 1024 x 1024 x 1024 product.
inline double measure_matmul_flops(Precision precision = Precision::fp32) {
  return measure_gemm_flops(1024, 1024, 1024, precision);
}

}  // namespace giant::train
