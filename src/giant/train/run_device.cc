#include "giant/train/run_device.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>
#if GIANT_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include "giant/base/error.h"

namespace giant::train {
namespace {

constexpr const char* kKey = "train.device";

std::string cuda_name(int index) { return "cuda:" + std::to_string(index); }

// The CUDA device a rank asking for `setting` gets; ConfigError when it has none.
int cuda_index(const DeviceSetting& setting, const std::string& asked, int local_rank) {
  if (!cuda_in_libtorch()) {
    throw ConfigError(kKey, "is '" + asked + "', but this giant is built against a libtorch without CUDA (" +
                                TORCH_VERSION + "); use cpu, or build against a CUDA libtorch (scripts/build-cuda)");
  }
  const int visible = static_cast<int>(torch::cuda::device_count());
  if (visible == 0) {
    throw ConfigError(kKey, "is '" + asked + "', but this process sees no CUDA device (check the driver and "
                                              "CUDA_VISIBLE_DEVICES), or use cpu");
  }
  const int index = setting.index >= 0 ? setting.index : local_rank;
  if (index < visible) return index;
  const std::string seen = std::to_string(visible) + " CUDA device(s), " + cuda_name(0) +
                           (visible > 1 ? " to " + cuda_name(visible - 1) : "");
  if (setting.index >= 0) throw ConfigError(kKey, "is '" + asked + "', but this process sees " + seen);
  throw ConfigError(kKey, "is '" + asked + "', which gives each rank the device of its local rank, but local rank " +
                              std::to_string(local_rank) + " is past the " + seen +
                              " this process sees; start at most one rank per device");
}

}  // namespace

// Its CUDA library registers the CUDA device guard when it loads.
bool cuda_in_libtorch() { return c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA); }

std::string resolve_device(TrainSettings& train, int local_rank) {
  const DeviceSetting setting = parse_device(train.device);
  switch (setting.kind) {
    case DeviceSetting::Kind::cpu: return "";
    case DeviceSetting::Kind::cuda: train.device = cuda_name(cuda_index(setting, train.device, local_rank)); return "";
    case DeviceSetting::Kind::automatic: break;
  }
  if (!cuda_in_libtorch() || torch::cuda::device_count() == 0) {
    train.device = "cpu";
    return "";
  }
  train.device = cuda_name(cuda_index(setting, "auto", local_rank));
  return "train.device: " + train.device + " (auto: the device of local rank " + std::to_string(local_rank) + ")";
}

c10::Device run_device(const TrainSettings& train) {
  const DeviceSetting setting = parse_device(train.device);
  GIANT_CHECK(setting.kind == DeviceSetting::Kind::cpu || setting.index >= 0, "train.device '", train.device,
              "' is not resolved (resolve_device first)");
  if (setting.kind == DeviceSetting::Kind::cpu) return c10::Device(c10::DeviceType::CPU);
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(setting.index));
}

void synchronize(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

CudaDeviceInfo cuda_device_info(int index) {
#if GIANT_TORCH_CUDA
  const auto* properties = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(index));
  return {properties->name, static_cast<double>(properties->totalGlobalMem)};
#else
  throw Error(cuda_name(index) + ": this giant is built against a libtorch without CUDA (" + TORCH_VERSION + ")");
#endif
}

at::Generator device_generator(c10::Device device) {
  if (device.is_cpu()) return at::detail::getDefaultCPUGenerator();
  return at::globalContext().defaultGenerator(device);
}

}  // namespace giant::train
