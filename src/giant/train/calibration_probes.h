// What `giant plan --calibrate` measures this machine with: libtorch's GEMMs
// and elementwise kernels as training runs them, in each precision the
// device computes in, one thread per device.
#pragma once

#include "giant/planner/calibrate.h"

namespace giant::train {

// Probes on libtorch's CPU kernels: a device is one rank on one core, as
// giant launch runs them with train.threads = 1. Their precision probe
// tries a tiny matrix product, layer norm, GeLU, softmax and add in the
// dtype and reports libtorch's error when one has no kernel (fp16 on CPUs).
planner::CalibrationProbes libtorch_calibration_probes();

}  // namespace giant::train
