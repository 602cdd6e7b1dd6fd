// parallel.auto in the run's precision: the planner is asked about
// train.precision and train.grad_dtype, on the cluster file's rates for that
// precision, and the chosen line names it (and says when the file has no
// rates for it, or describes other devices than the run's).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "giant/train/auto_layout.h"
#include "giant/train/run_config.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

// Two CPU devices as `giant plan --calibrate` writes them: fp32 in
// [device], bf16 GEMMs 10x as fast.
const char kDevices[] =
    "name = \"two cpus\"\nhosts = 1\ndevices_per_host = 2\n"
    "[device]\ntype = \"cpu\"\nmemory_gib = 8\nmemory_gbytes_per_s = 10\ndtype_bytes = 4\n"
    "peak_tflops = 0.03\ngemm_efficiency = 1\ngemm_half_dim = 40\nelementwise_gbytes_per_s = 4\n";
const char kBf16Rates[] = "[device.bf16]\npeak_tflops = 0.3\ngemm_half_dim = 60\nelementwise_gbytes_per_s = 3\n";
const char kLinks[] =
    "[intra_host]\ntransport = \"tcp\"\nbandwidth_gbytes_per_s = 1.5\nlatency_us = 40\nefficiency = 0.9\n"
    "[inter_host]\ntransport = \"tcp\"\nbandwidth_gbytes_per_s = 0.1\nlatency_us = 60\nefficiency = 0.9\n";

double predicted_step(const std::string& line) {
  std::smatch match;
  EXPECT_TRUE(std::regex_search(line, match, std::regex("predicted ([0-9.]+) s per step"))) << line;
  return match.empty() ? 0 : std::stod(match[1]);
}

TEST(AutoLayout, ThePlannerCostsTheRunsPrecision) {
  const test::TempDir dir("giant-auto-layout-precision");
  const std::string calibrated = dir.file("cluster.toml", std::string(kDevices) + kBf16Rates + kLinks);
  const std::string old = dir.file("old.toml", std::string(kDevices) + kLinks);
  auto choose = [&](const std::string& file, std::vector<std::string> overrides) {
    overrides.push_back("parallel.auto=true");
    overrides.push_back("parallel.cluster=\"" + file + "\"");
    RunConfig c = run_config_from(test::keys_with(overrides));
    return choose_layout(c, 2);
  };
  const std::string fp32 = choose(calibrated, {"train.precision=\"fp32\""});
  const std::string bf16 = choose(calibrated, {"train.precision=\"bf16\""});
  const std::string all_bf16 = choose(calibrated, {"train.precision=\"bf16\"", "train.grad_dtype=\"bf16\""});
  std::printf("%s\n%s\n%s\n", fp32.c_str(), bf16.c_str(), all_bf16.c_str());
  EXPECT_NE(fp32.find(" in fp32 (predicted"), std::string::npos) << fp32;
  EXPECT_NE(bf16.find(" in bf16 (gradients fp32) (predicted"), std::string::npos) << bf16;
  EXPECT_NE(all_bf16.find(" in bf16 (predicted"), std::string::npos) << all_bf16;
  EXPECT_LT(predicted_step(bf16), predicted_step(fp32));
  EXPECT_EQ(bf16.find("no bf16 rates"), std::string::npos) << bf16;

  // A file from before per-precision rates: its fp32 rates, and it says so.
  const std::string from_old = choose(old, {"train.precision=\"bf16\""});
  EXPECT_NE(from_old.find(" in bf16 (gradients fp32) (predicted"), std::string::npos) << from_old;
  EXPECT_NE(from_old.find("the cluster file has no bf16 rates: its fp32 ([device]) rates are used"),
            std::string::npos)
      << from_old;
  EXPECT_EQ(choose(old, {"train.precision=\"fp32\""}).find("no fp32 rates"), std::string::npos);
}

// 2 hosts of 2 shm ranks on a slow link: what the run leaves unset (the
// ZeRO stage, recomputation, the gradient wire) the planner chooses; what
// it sets, it keeps.
TEST(AutoLayout, ChoosesTheStageRecomputationAndWireOnlyWhenLeftUnset) {
  const test::TempDir dir("giant-auto-layout-unset");
  const std::string file = dir.file(
      "cluster.toml",
      "name = \"two hosts\"\nhosts = 2\ndevices_per_host = 2\n"
      "[device]\ntype = \"cpu\"\nmemory_gib = 8\nmemory_gbytes_per_s = 10\ndtype_bytes = 4\n"
      "peak_tflops = 0.1\ngemm_efficiency = 1\ngemm_half_dim = 40\nelementwise_gbytes_per_s = 19\n"
      "[intra_host]\ntransport = \"shm\"\nbandwidth_gbytes_per_s = 10\nlatency_us = 10\nefficiency = 1\n"
      "[inter_host]\ntransport = \"tcp\"\nbandwidth_gbytes_per_s = 0.002\nlatency_us = 100\nefficiency = 1\n");
  auto choose = [&](std::vector<std::string> overrides) {
    for (const char* key : {"parallel.auto=true", "train.precision=\"fp32\"", "model.layers=2", "model.hidden=256",
                            "model.heads=2", "model.seq_len=256", "model.vocab=256", "train.global_batch=32"})
      overrides.push_back(key);
    overrides.push_back("parallel.cluster=\"" + file + "\"");
    RunConfig c = run_config_from(test::keys_with(overrides));
    const std::string line = choose_layout(c, 4);
    std::printf("%s\n", line.c_str());
    return c;
  };
  const RunConfig chosen = choose({});
  EXPECT_NE(chosen.layout.grad_wire, ccl::GradWire::none) << chosen.layout.describe();
  EXPECT_EQ(chosen.layout.zero, 0) << chosen.layout.describe();  // compressed gradients need no gather after
  EXPECT_FALSE(chosen.parallel.grad_wire_auto);
  const RunConfig kept = choose({"parallel.zero=2", "train.recompute=\"full\"", "parallel.grad_wire=\"none\""});
  EXPECT_EQ(kept.layout.zero, 2);
  EXPECT_EQ(kept.layout.recompute, Recompute::full);
  EXPECT_EQ(kept.layout.grad_wire, ccl::GradWire::none);
}

// A cluster file of GPUs chosen on by a run on the CPU: the choice is the
// file's, and the lines say so; a file of CPUs says nothing more.
TEST(AutoLayout, AFileOfOtherDevicesThanTheRunsIsNamed) {
  const test::TempDir dir("giant-auto-layout-device");
  const std::string cpus = dir.file("cpus.toml", std::string(kDevices) + kLinks);
  std::string gpus_text = std::string(kDevices) + kLinks;
  gpus_text.replace(gpus_text.find("type = \"cpu\""), 12, "type = \"H100\"");
  const std::string gpus = dir.file("gpus.toml", gpus_text);
  auto choose = [&](const std::string& file) {
    RunConfig c = run_config_from(test::keys_with(
        {"parallel.auto=true", "parallel.cluster=\"" + file + "\"", "train.device=\"cpu\"", "train.precision=\"fp32\""}));
    return choose_layout(c, 2);
  };
  const std::string on_gpus = choose(gpus);
  EXPECT_NE(on_gpus.find("note: '" + gpus + "' describes H100 devices but this run is on cpu"), std::string::npos)
      << on_gpus;
  EXPECT_EQ(choose(cpus).find("note:"), std::string::npos);
}

}  // namespace
}  // namespace giant::train
