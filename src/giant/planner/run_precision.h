// The dtypes one training run uses, as the planner counts its time and
// bytes: matrix products and activations in the compute precision, with an
// fp32 master copy of the weights under mixed precision; gradients
// accumulated and reduced over data parallel in their own dtype.
#pragma once

#include <optional>
#include <string>

#include "giant/base/precision.h"
#include "giant/planner/cluster_spec.h"

namespace giant::planner {

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

// What a plan computes in when no precision is asked for: the dtype of the
// cluster file's [device] rates, gradients too (16-bit on the GPU presets,
// as the published runs; fp32 on a calibrated CPU).
RunPrecision default_run_precision(const DeviceSpec& device);
RunPrecision resolve_precision(const std::optional<RunPrecision>& asked, const DeviceSpec& device);

// "" when the device has rates for `compute`; else what is used instead
// ("the cluster file has no bf16 rates: its fp32 ([device]) rates are used;
// `giant plan --calibrate` measures them").
std::string missing_rates_note(const DeviceSpec& device, Precision compute);

}  // namespace giant::planner
