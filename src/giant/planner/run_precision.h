// The precision a plan computes in (RunPrecision, layout/run_precision.h)
// when none is asked for, and what the cluster file's rates say about it.
#pragma once

#include <optional>
#include <string>

#include "giant/base/precision.h"
#include "giant/layout/run_precision.h"
#include "giant/planner/cluster_spec.h"

namespace giant::planner {

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
