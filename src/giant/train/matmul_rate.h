// The matrix-product rates of a run: measured once at start-up, shared by
// train.precision = auto and MFU, and the same on every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <c10/core/Device.h>

#include "giant/base/precision.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::train {

// Median FLOP/s (2 m n k per product) of an [m, k] x [k, n] product in
// `precision`, timed at least `min_repetitions` times and for at least
// `min_seconds` in all, after one warm-up: a bf16 product of a few
// milliseconds needs many runs for a median that a busy neighbour core does
// not sway. When the first timed product runs below `give_up_below` FLOP/s
// its rate is returned at once (a precision too slow to be chosen need not
// be timed closely). Error when the device has no matrix product in that
// dtype. On a GPU each product is timed to its end (the device synchronized).
double measure_gemm_flops(int64_t m, int64_t n, int64_t k, Precision precision, int min_repetitions = 5,
                          double min_seconds = 0.25, double give_up_below = 0,
                          c10::Device device = c10::Device(c10::DeviceType::CPU));

// One rank's FLOP/s in each precision measured (0: not measured).
struct MatrixRates {
  double fp32 = 0, bf16 = 0, fp16 = 0;

  double of(Precision precision) const;
  void set(Precision precision, double flops);
};

// The reference product: 1024 x 1024 x 1024.
inline constexpr int64_t kReferenceGemmDim = 1024;

// What one rank measures: the reference product in each precision.
using RateProbe = std::function<MatrixRates(const std::vector<Precision>& precisions)>;

// Times the reference product in each of `precisions`, in order; a later
// precision whose first product runs slower than the first precision's is
// not timed further (see measure_gemm_flops).
MatrixRates probe_reference_products(const std::vector<Precision>& precisions,
                                     c10::Device device = c10::Device(c10::DeviceType::CPU));
// probe_reference_products on `device`.
RateProbe reference_products_on(c10::Device device);

// The run's rates, on `threads` threads, from `probe` (tests pass their
// own). Collective over `world` (null: this process alone): the ranks of one
// host take turns, so that no rank times its product while a neighbour loads
// the cores it shares, and every rank returns the slowest rank's rate for
// each precision, so that what is decided from them agrees everywhere.
MatrixRates measure_matrix_rates(const std::vector<Precision>& precisions, int threads, ccl::Communicator* world,
                                 const RateProbe& probe = reference_products_on(c10::Device(c10::DeviceType::CPU)));

}  // namespace giant::train
