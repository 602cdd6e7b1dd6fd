// Training on a CUDA device against the same run on the CPU: built only
// against a CUDA libtorch (scripts/build-cuda) and run by scripts/device-check
// on a machine with a GPU. The model is drawn on the host in both, so the
// runs start from the same parameters; they then differ only by the order
// each device's kernels sum in: fp32 within 1e-4 relative over three steps,
// bf16 within a few of bf16's steps.
#include <gtest/gtest.h>

#include <csignal>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/train/cluster_probe.h"
#include "giant/train/memory_check.h"
#include "giant/train/run_device.h"
#include "giant/train/trainer.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

using test::keys_with;
using test::TempDir;

std::vector<std::string> small_run(const TempDir& dir, const std::string& device, const std::string& precision) {
  std::string text;
  for (int i = 0; text.size() < 6000; ++i) text += "In the beginning " + std::to_string(i * 7 % 13) + ". ";
  return {"model.layers=2",         "model.hidden=64",        "model.heads=4",        "model.seq_len=32",
          "train.global_batch=8",   "train.micro_batch=4",    "train.threads=2",      "train.eval_every=0",
          "train.eval_batches=1",   "train.sample_tokens=8",  "train.warmup_steps=1", "train.steps=3",
          "train.device=\"" + device + "\"", "train.precision=\"" + precision + "\"",
          "data.path=\"" + dir.file("text.txt", text) + "\"",
          "train.out_dir=\"" + dir.path() + "/" + device + "-" + precision + "\""};
}

struct Outcome {
  TrainSummary summary;
  std::vector<at::Tensor> parameters;  // on the host
};

Outcome train_on(const std::string& device, const std::string& precision, const TempDir& dir,
                 std::vector<std::string> extra = {}, TrainHooks hooks = {}) {
  auto o = small_run(dir, device, precision);
  o.insert(o.end(), extra.begin(), extra.end());
  std::ostringstream out;
  Trainer trainer(run_config_from(keys_with(o)), "", out, false, std::move(hooks));
  for (const auto& p : trainer.parameters()) EXPECT_EQ(p.device().type(), at::Device(device).type()) << device;
  Outcome r{trainer.run(), {}};
  for (const auto& p : trainer.updated_tensors()) r.parameters.push_back(p.detach().to(torch::kCPU, torch::kFloat));
  return r;
}

void expect_close(const Outcome& cuda, const Outcome& cpu, double tolerance) {
  EXPECT_NEAR(cuda.summary.first_loss, cpu.summary.first_loss, tolerance * cpu.summary.first_loss);
  EXPECT_NEAR(cuda.summary.last_loss, cpu.summary.last_loss, tolerance * cpu.summary.last_loss);
  ASSERT_EQ(cuda.parameters.size(), cpu.parameters.size());
  for (size_t i = 0; i < cpu.parameters.size(); ++i) {
    const double scale = cpu.parameters[i].abs().max().item<double>() + 1e-12;
    const double diff = (cuda.parameters[i] - cpu.parameters[i]).abs().max().item<double>();
    EXPECT_LE(diff, tolerance * scale) << "parameter " << i;
  }
}

TEST(CudaTraining, AStepOnCudaEqualsTheCpuStepInFp32) {
  ASSERT_GT(torch::cuda::device_count(), 0u) << "no CUDA device is visible";
  TempDir dir;
  const Outcome cuda = train_on("cuda:0", "fp32", dir), cpu = train_on("cpu", "fp32", dir);
  expect_close(cuda, cpu, 1e-4);
  EXPECT_FALSE(cuda.summary.sample.empty());  // generation ran on the device
}

TEST(CudaTraining, Bf16OnCudaFollowsTheCpuWithinBf16Steps) {
  ASSERT_GT(torch::cuda::device_count(), 0u) << "no CUDA device is visible";
  TempDir dir;
  const Outcome cuda = train_on("cuda:0", "bf16", dir), cpu = train_on("cpu", "bf16", dir);
  expect_close(cuda, cpu, 4 * 0.0078125);  // 4 of bf16's relative steps (2^-7)
}

// A run stopped after step 2 (its checkpoint written from the device, the
// CUDA generator dropout draws from included) and resumed onto it ends as
// the uninterrupted run does, bit for bit.
TEST(CudaTraining, ACheckpointOnCudaResumesBitwise) {
  ASSERT_GT(torch::cuda::device_count(), 0u) << "no CUDA device is visible";
  TempDir whole_dir, split_dir;
  const std::vector<std::string> dropout = {"model.dropout=0.1"};
  const Outcome whole = train_on("cuda:0", "fp32", whole_dir, dropout);
  int64_t steps_done = 0;
  TrainHooks stop_after_two;
  stop_after_two.after_backward = [&](int64_t step, const std::vector<at::Tensor>&) { steps_done = step + 1; };
  stop_after_two.stop_signal = [&] { return steps_done >= 2 ? SIGTERM : 0; };
  const Outcome stopped = train_on("cuda:0", "fp32", split_dir, dropout, stop_after_two);
  ASSERT_EQ(stopped.summary.last_step, 2);
  const Outcome resumed = train_on("cuda:0", "fp32", split_dir, {"model.dropout=0.1", "train.resume=\"auto\""});
  ASSERT_EQ(resumed.parameters.size(), whole.parameters.size());
  for (size_t i = 0; i < whole.parameters.size(); ++i) {
    EXPECT_TRUE(torch::equal(resumed.parameters[i], whole.parameters[i])) << "parameter " << i;
  }
}

// The memory check's limit on a GPU is the device's memory, not the host's.
TEST(CudaTraining, TheMemoryCheckCountsTheDevicesMemory) {
  ASSERT_GT(torch::cuda::device_count(), 0u) << "no CUDA device is visible";
  TempDir dir;
  const MemoryCheck check = predict_rank_memory(run_config_from(keys_with(small_run(dir, "cuda:0", "fp32"))), 1);
  EXPECT_EQ(check.limit_bytes, cuda_device_info(0).memory_bytes);
  EXPECT_NE(check.limit_source.find("cuda:0's"), std::string::npos) << check.limit_source;
}

// parallel.auto's measurement on a GPU measures the GPU: its name, its
// memory, and rates no CPU core reaches.
TEST(CudaTraining, TheClusterProbeMeasuresTheDevice) {
  ASSERT_GT(torch::cuda::device_count(), 0u) << "no CUDA device is visible";
  ClusterProbeOptions options;
  options.device = c10::Device(c10::DeviceType::CUDA, 0);
  options.precision = Precision::bf16;
  const MeasuredCluster measured = measure_cluster(nullptr, options);
  EXPECT_EQ(measured.cluster.device.type, cuda_device_info(0).name);
  EXPECT_EQ(measured.cluster.device.memory_bytes, cuda_device_info(0).memory_bytes);
  EXPECT_GT(measured.cluster.device.peak_flops, 10e12) << measured.summary;
  EXPECT_GT(measured.cluster.device.memory_bandwidth_bytes_per_s, 200e9) << measured.summary;
}

// Data parallelism (ZeRO-3) and a pipeline of two stages on two ranks: with
// two devices, one each, their collectives and messages through ccl's NCCL
// backend; with one, both ranks on it, through the staged backend (NCCL
// takes one rank per device).
TEST(CudaTraining, PipelineAndZero3OnCudaFollowTheSingleDevice) {
  ASSERT_GT(torch::cuda::device_count(), 0u) << "no CUDA device is visible";
  const bool one_each = torch::cuda::device_count() >= 2;
  TempDir dir;
  const Outcome single = train_on("cuda:0", "fp32", dir);
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"parallel.dp=2", "parallel.zero=3"}, std::vector<std::string>{"parallel.pp=2"}}) {
    auto store = std::make_shared<ccl::MemoryStore>();
    std::vector<Outcome> ranks(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] {
        auto world = ccl::Communicator::create(store, rank, 2);
        auto o = small_run(dir, "cuda:" + std::to_string(one_each ? rank : 0), "fp32");
        o.insert(o.end(), layout.begin(), layout.end());
        o.push_back("train.out_dir=\"" + dir.path() + "/ranks-" + layout.front() + "\"");
        std::ostringstream out;
        Trainer trainer(run_config_from(keys_with(o)), "", out, false, {}, world);
        ranks[rank].summary = trainer.run();
      });
    }
    for (auto& t : threads) t.join();
    const double last = ranks[layout.front() == "parallel.pp=2" ? 1 : 0].summary.last_loss;
    EXPECT_NEAR(last, single.summary.last_loss, 1e-4 * single.summary.last_loss) << layout.front();
  }
}

}  // namespace
}  // namespace giant::train
