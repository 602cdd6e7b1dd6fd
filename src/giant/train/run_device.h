// train.device: where a rank's tensors live and its kernels run.
//
// `auto` (the default) is cuda when the libtorch in use has CUDA and the
// rank sees a device, else cpu; `cuda` is the device of the rank's local
// rank (as torchrun's scripts do), `cuda:N` device N. resolve_device turns
// the setting into the one device the run uses ("cpu" or "cuda:N") before
// anything is built, so that every later part reads a concrete device.
#pragma once

#include <string>

#include <c10/core/Device.h>

#include "giant/train/device_setting.h"
#include "giant/train/run_config.h"

namespace giant::train {

// Whether the libtorch in this process has CUDA (whether or not a device is
// visible).
bool cuda_in_libtorch();

// Settles train.device for a rank of local rank `local_rank` on its host:
// rewrites train.device to "cpu" or "cuda:N" and returns a line saying what
// `auto` chose when it chose a GPU (empty otherwise). ConfigError naming
// train.device when cuda is asked of a libtorch without CUDA, when no device
// is visible, or when the index (or the local rank) is past the visible ones.
std::string resolve_device(TrainSettings& train, int local_rank);

// The device of a resolved train.device (resolve_device first).
c10::Device run_device(const TrainSettings& train);

}  // namespace giant::train
