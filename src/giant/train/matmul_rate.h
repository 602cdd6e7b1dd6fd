// The FLOP rate MFU is measured against: a 1024 x 1024 x 1024 float32
// matrix product on the threads the run uses, measured at start-up.
#pragma once

#include <cstdint>

namespace giant::train {

// Median FLOP/s (2 m n k per product) of an [m, k] x [k, n] float32 product
// over `repetitions` timed runs, after one warm-up.
double measure_gemm_flops(int64_t m, int64_t n, int64_t k, int repetitions = 5);

// MFU's reference: the 1024 x 1024 x 1024 product.
inline double measure_matmul_flops(int repetitions = 5) {
  return measure_gemm_flops(1024, 1024, 1024, repetitions);
}

}  // namespace giant::train
