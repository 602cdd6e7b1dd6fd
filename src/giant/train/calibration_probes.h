// What `giant plan --calibrate` measures this machine with: libtorch's GEMMs
// and elementwise kernels as training runs them, in each precision the
// device computes in, one thread per device.
#pragma once

#include <cstdint>

#include <c10/core/Device.h>

#include "giant/base/precision.h"
#include "giant/planner/calibrate.h"

namespace giant::train {

// FLOP/s of a linear layer's three GEMMs (forward, input and weight
// gradients: 6 m n k FLOPs) in `precision` on `device` (the CPU: this
// thread's torch threads). min_seconds 0: the median of a few calls;
// otherwise the mean over calls made for at least that long (the rate kept
// while other ranks share the core). A GPU's work is waited for in each call.
double measure_linear_gemm_flops(Precision precision, int64_t m, int64_t n, int64_t k, double min_seconds = 0,
                                 c10::Device device = c10::Device(c10::DeviceType::CPU));
// Bytes read + written per second by a layer's elementwise kernels (layer
// norm, softmax, GeLU, residual add, a transposing copy) on rows x cols
// tensors on `device`; min_seconds > 0: the mean over rounds of all of them
// for that long.
double measure_elementwise_bytes_per_s(Precision precision, int64_t rows, int64_t cols, double min_seconds = 0,
                                       c10::Device device = c10::Device(c10::DeviceType::CPU));
// A copy of `bytes` between two buffers on a GPU: bytes read + written per
// second, median of `repeats` (the host's is planner::measure_memory_bandwidth).
double measure_device_copy_bytes_per_s(c10::Device device, int64_t bytes, int repeats);

// Probes on libtorch's CPU kernels: a device is one rank on one core, as
// giant launch runs them with train.threads = 1. Their precision probe
// tries a tiny matrix product, layer norm, GeLU, softmax and add in the
// dtype and reports libtorch's error when one has no kernel (fp16 on CPUs).
planner::CalibrationProbes libtorch_calibration_probes();

}  // namespace giant::train
