// Which precision a run computes in: the libtorch dtype of each precision,
// whether the device runs a GPT's kernels in it, and train.precision = auto
// (bf16 where its matrix products are clearly faster than fp32's).
#pragma once

#include <string>

#include <c10/core/ScalarType.h>

#include "giant/base/precision.h"
#include "giant/train/run_config.h"

namespace giant::train {

c10::ScalarType scalar_type_of(Precision precision);

// auto picks bf16 when its matrix products run at least this many times as
// fast as fp32's (the dtype conversions and fp32 statistics cost the rest).
constexpr double kAutoBf16MinSpeedup = 1.5;

// Empty when the host device runs a GPT's forward and backward kernels
// (matrix product, layer norm, GELU, softmax) in `precision`; else why not,
// in the user's terms.
std::string unsupported_reason(Precision precision);

// What `auto` picks from the two measured rates (FLOP/s).
Precision choose_automatic_precision(double fp32_flops, double bf16_flops);

// Resolves train.precision = auto by timing fp32 and bf16 products on the
// run's threads, and checks the device runs the chosen precision, before any
// work. Returns the line the run prints (the choice and why). ConfigError
// naming train.precision (or train.grad_dtype) when it cannot run.
std::string resolve_precision(RunConfig& config);

}  // namespace giant::train
