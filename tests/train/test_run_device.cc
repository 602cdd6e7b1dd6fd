// train.device: its forms, the errors naming the key, and what `auto` and
// `cuda` settle on. What a GPU would add is asked of the libtorch in use, so
// the same test holds on a CPU-only libtorch (the CI's) and a CUDA one.
#include <gtest/gtest.h>

#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>

#include "giant/base/error.h"
#include "giant/train/run_config.h"
#include "giant/train/checkpoint_state.h"
#include "giant/train/run_device.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

using test::error_key;
using test::error_message;
using test::keys_with;

bool cuda_visible() { return cuda_in_libtorch() && torch::cuda::device_count() > 0; }

TrainSettings with_device(const std::string& device) {
  TrainSettings t;
  t.device = device;
  return t;
}

TEST(RunDevice, ReadsEveryFormAndNamesTheKeyForOthers) {
  EXPECT_EQ(parse_device("auto").kind, DeviceSetting::Kind::automatic);
  EXPECT_EQ(parse_device("cpu").kind, DeviceSetting::Kind::cpu);
  EXPECT_EQ(parse_device("cuda").kind, DeviceSetting::Kind::cuda);
  EXPECT_EQ(parse_device("cuda").index, -1);
  EXPECT_EQ(parse_device("cuda:3").index, 3);
  for (const std::string bad : {"gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda:1:2", "cuda:99999", " cpu", ""}) {
    const std::string message = error_message([&] { parse_device(bad); });
    EXPECT_NE(message.find("'train.device': must be auto, cpu, cuda or cuda:N, got '" + bad + "'"),
              std::string::npos)
        << bad << ": " << message;
  }
  EXPECT_EQ(error_key([] { run_config_from(keys_with({"train.device=\"gpu\""})); }), "train.device");
  EXPECT_EQ(error_key([] { run_config_from(keys_with({"train.device=0"})); }), "train.device");  // not a string
  EXPECT_EQ(run_config_from(keys_with({})).train.device, "auto");
}

TEST(RunDevice, CpuStaysAndAutoTakesAGpuOnlyWhereOneIsVisible) {
  TrainSettings cpu = with_device("cpu");
  EXPECT_EQ(resolve_device(cpu, 0), "");
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_TRUE(run_device(cpu).is_cpu());
  TrainSettings automatic = with_device("auto");
  const std::string line = resolve_device(automatic, 0);
  if (cuda_visible()) {
    EXPECT_EQ(automatic.device, "cuda:0");
    EXPECT_NE(line.find("train.device: cuda:0 (auto"), std::string::npos) << line;
    EXPECT_TRUE(run_device(automatic).is_cuda());
  } else {
    EXPECT_EQ(automatic.device, "cpu");
    EXPECT_EQ(line, "");
  }
  EXPECT_EQ(resolve_device(automatic, 0), "");  // settled: resolving again changes nothing
  EXPECT_THROW(run_device(with_device("auto")), Error);  // an unsettled device is a caller's mistake
}

TEST(RunDevice, CudaWithoutADeviceForTheRankNamesTheKey) {
  if (!cuda_in_libtorch()) {
    for (const std::string asked : {"cuda", "cuda:0"}) {
      TrainSettings t = with_device(asked);
      const std::string message = error_message([&] { resolve_device(t, 0); });
      EXPECT_NE(message.find("'train.device': is '" + asked + "', but this giant is built against a libtorch "
                             "without CUDA"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("scripts/build-cuda"), std::string::npos) << message;
    }
    return;
  }
  const int visible = static_cast<int>(torch::cuda::device_count());
  TrainSettings past = with_device("cuda:" + std::to_string(visible));
  EXPECT_NE(error_message([&] { resolve_device(past, 0); }).find("but this process sees"), std::string::npos);
  TrainSettings by_rank = with_device("cuda");
  EXPECT_NE(error_message([&] { resolve_device(by_rank, visible); }).find("local rank " + std::to_string(visible)),
            std::string::npos);
  if (visible > 0) {
    TrainSettings first = with_device("cuda");
    resolve_device(first, 0);
    EXPECT_EQ(first.device, "cuda:0");
  }
}

// What a run's device brings with it: the generator dropout draws from (its
// state saved as a blob of its own kind) and, on a GPU, the memory limit.
TEST(RunDevice, TheGeneratorAndMemoryAreTheDevicesOwn) {
  EXPECT_EQ(generator_blob_name(3, c10::Device(c10::DeviceType::CPU)), "rng/3");
  EXPECT_EQ(generator_blob_name(3, c10::Device(c10::DeviceType::CUDA, 0)), "rng_cuda/3");
  EXPECT_TRUE(device_generator(c10::Device(c10::DeviceType::CPU)) == at::detail::getDefaultCPUGenerator());
  if (!cuda_in_libtorch()) {
    try {
      cuda_device_info(0);
      ADD_FAILURE() << "cuda_device_info(0) answered on a libtorch without CUDA";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cuda:0: this giant is built against a libtorch without CUDA"),
                std::string::npos)
          << e.what();
    }
    return;
  }
  if (torch::cuda::device_count() > 0) {
    EXPECT_GT(cuda_device_info(0).memory_bytes, 1e9);
    EXPECT_FALSE(cuda_device_info(0).name.empty());
  }
}

}  // namespace
}  // namespace giant::train
