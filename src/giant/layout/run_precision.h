// The dtypes one training run uses: matrix products and activations in the
// compute precision, with an fp32 master copy of the weights under mixed
// precision; gradients accumulated and reduced over data parallel in their
// own dtype. The formats themselves are base's (base/precision.h).
#pragma once

#include <string>

#include "giant/base/precision.h"

namespace giant {

struct RunPrecision {
  // GEMMs, activations, the weights' compute copy, and what tensor and
  // pipeline parallelism send (train.precision).
  Precision compute = Precision::bf16;
  // Gradient accumulation and the data-parallel reduction (train.grad_dtype).
  Precision gradients = Precision::bf16;

  double compute_bytes() const { return precision_bytes(compute); }
  double gradient_bytes() const { return precision_bytes(gradients); }
  // Mixed precision keeps fp32 master weights beside the compute copy;
  // fp32 training updates the weights themselves.
  bool keeps_master_weights() const { return compute != Precision::fp32; }
  // "bf16 (gradients fp32)", or just "fp32" when both are one dtype.
  std::string describe() const;
};

}  // namespace giant
