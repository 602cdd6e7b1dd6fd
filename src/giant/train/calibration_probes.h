// What `giant plan --calibrate` measures this machine with: libtorch's GEMMs
// and elementwise kernels as training runs them, in each precision the
// device computes in, one thread per device.
#pragma once

#include <cstdint>

#include "giant/base/precision.h"
#include "giant/planner/calibrate.h"

namespace giant::train {

// FLOP/s of a linear layer's three GEMMs (forward, input and weight
// gradients: 6 m n k FLOPs) in `precision` on this thread's torch threads.
// min_seconds 0: the median of a few calls; otherwise the mean over calls
// made for at least that long (the rate kept while other ranks share the core).
double measure_linear_gemm_flops(Precision precision, int64_t m, int64_t n, int64_t k, double min_seconds = 0);
// Bytes read + written per second by a layer's elementwise kernels (layer
// norm, softmax, GeLU, residual add, a transposing copy) on rows x cols
// tensors; min_seconds > 0: the mean over rounds of all of them for that long.
double measure_elementwise_bytes_per_s(Precision precision, int64_t rows, int64_t cols, double min_seconds = 0);

// Probes on libtorch's CPU kernels: a device is one rank on one core, as
// giant launch runs them with train.threads = 1. Their precision probe
// tries a tiny matrix product, layer norm, GeLU, softmax and add in the
// dtype and reports libtorch's error when one has no kernel (fp16 on CPUs).
planner::CalibrationProbes libtorch_calibration_probes();

}  // namespace giant::train
