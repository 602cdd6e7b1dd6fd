// Which precision a run computes in: the libtorch dtype of each precision,
// whether the device runs a GPT's kernels in it, and train.precision = auto
// (bf16 where its matrix products are clearly faster than fp32's).
#pragma once

#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "giant/base/precision.h"
#include "giant/train/matmul_rate.h"
#include "giant/train/run_config.h"

namespace giant::train {

c10::ScalarType scalar_type_of(Precision precision);

// auto picks bf16 when its matrix products run at least this many times as
// fast as fp32's (the dtype conversions and fp32 statistics cost the rest).
constexpr double kAutoBf16MinSpeedup = 1.5;

// Empty when `device` runs a GPT's forward and backward kernels (matrix
// product, layer norm, GELU, softmax) in `precision`; else why not, in the
// user's terms.
std::string unsupported_reason(Precision precision, c10::Device device = c10::Device(c10::DeviceType::CPU));

// What `auto` picks from the two measured rates (FLOP/s).
Precision choose_automatic_precision(double fp32_flops, double bf16_flops);

// The precisions whose rates a run measures: train.precision, or for auto
// fp32 and (where the device has its kernels) bf16. These and the two below
// read the run's device: train.device resolved first (run_device.h).
std::vector<Precision> precisions_to_measure(const TrainSettings& train);

// Checks, before any work, that the device runs train.precision (when it is
// not auto) and that train.grad_dtype fits it. ConfigError naming the key.
void check_precision_runs(const TrainSettings& train);

// Resolves train.precision = auto from the run's measured rates and checks
// the device runs the chosen precision. Returns the line the run prints
// (the choice and why). ConfigError naming train.precision (or
// train.grad_dtype) when it cannot run.
std::string resolve_precision(RunConfig& config, const MatrixRates& rates);

}  // namespace giant::train
