// train.device: where a rank's tensors live and its kernels run.
//
// `auto` (the default) is cuda when the libtorch in use has CUDA and the
// rank sees a device, else cpu; `cuda` is the device of the rank's local
// rank (as torchrun's scripts do), `cuda:N` device N. resolve_device turns
// the setting into the one device the run uses ("cpu" or "cuda:N") before
// anything is built, so that every later part reads a concrete device.
#pragma once

#include <string>

#include <ATen/core/Generator.h>
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

// Waits for the work queued on `device` (nothing to wait for on the CPU):
// what a timing of a GPU's kernels needs around it.
void synchronize(c10::Device device);

// What a CUDA device is: its name ("NVIDIA H200") and memory.
struct CudaDeviceInfo {
  std::string name;
  double memory_bytes = 0;
};
// CUDA device `index`'s (giant::Error when this libtorch has no CUDA).
CudaDeviceInfo cuda_device_info(int index);

// The generator dropout draws from on `device`: libtorch's default one for
// the device (the CPU's, or the CUDA device's own).
at::Generator device_generator(c10::Device device);

}  // namespace giant::train
