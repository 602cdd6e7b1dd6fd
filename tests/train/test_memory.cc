// Measured memory: the tracking allocator's per-rank counts, each rank's
// model-state bytes per parameter against the ZeRO formulas (the planner's
// one definition) with ranks as threads through the trainer, activations
// growing with the micro-batch, and the memory fields of the log,
// metrics.jsonl and TensorBoard.
#include <gtest/gtest.h>

#include <cstdio>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "giant/planner/memory_model.h"
#include "giant/train/memory_use.h"
#include "giant/train/tracking_allocator.h"
#include "giant/train/trainer.h"
#include "train/support/event_file_reader.h"
#include "train/support/layout_runner.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

using test::Layout;
using test::LayoutRunner;
using test::RunResult;

constexpr int64_t kTensorBytes = 1 << 20;  // a 1 MiB tensor: 262144 floats

torch::Tensor one_mib() { return torch::ones({kTensorBytes / 4}); }

TEST(TrackingAllocator, ChargesTheBoundCounterAndItsFreesWhereverTheyHappen) {
  install_tracking_allocator();
  auto mine = std::make_shared<AllocationCounter>();
  const auto previous = bind_thread_allocations(mine);
  torch::Tensor held = one_mib();
  EXPECT_EQ(mine->live(), kTensorBytes);
  {
    torch::Tensor transient = one_mib();
    EXPECT_EQ(mine->live(), 2 * kTensorBytes);
  }
  EXPECT_EQ(mine->live(), kTensorBytes);
  EXPECT_EQ(mine->peak(), 2 * kTensorBytes);
  mine->reset_peak();
  EXPECT_EQ(mine->peak(), kTensorBytes);

  // Freed on another thread (bound elsewhere): taken off the counter that paid.
  auto other = std::make_shared<AllocationCounter>();
  std::thread([&, tensor = std::move(held)]() mutable {
    bind_thread_allocations(other);
    tensor = torch::Tensor();
  }).join();
  EXPECT_EQ(mine->live(), 0);
  EXPECT_EQ(other->live(), 0);
  bind_thread_allocations(previous);
}

TEST(TrackingAllocator, ThreadsWithoutABindingAreChargedToTheUnboundCounter) {
  install_tracking_allocator();
  auto mine = std::make_shared<AllocationCounter>();
  const auto previous = bind_thread_allocations(mine);
  const int64_t unbound_before = unbound_allocations()->live();
  torch::Tensor made_elsewhere;
  std::thread([&] {
    bind_thread_allocations(nullptr);
    made_elsewhere = one_mib();
  }).join();
  EXPECT_EQ(mine->live(), 0);
  EXPECT_EQ(unbound_allocations()->live() - unbound_before, kTensorBytes);
  made_elsewhere = torch::Tensor();
  EXPECT_EQ(unbound_allocations()->live(), unbound_before);
  bind_thread_allocations(previous);
}

TEST(MemoryUse, TakesEachKindsPeakAndDescribesThem) {
  MemoryUse a, b;
  a.parameters = 4096;
  a.activations = 10;
  b.parameters = 1024;
  b.activations = 3 * 1024 * 1024;
  b.max_rss = 5;
  a.take_max(b);
  EXPECT_EQ(a.parameters, 4096);
  EXPECT_EQ(a.activations, 3 * 1024 * 1024);
  EXPECT_EQ(a.max_rss, 5);
  EXPECT_EQ(a.total(), 4096 + 3 * 1024 * 1024);
  const std::string text = describe_memory(a);
  EXPECT_NE(text.find("parameters 4 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("activations 3 MiB"), std::string::npos) << text;
  EXPECT_FALSE(MemoryUse().measured());
}

// Each rank's parameters (the denominator of bytes per parameter).
int64_t parameter_count(const test::RankResult& rank) {
  int64_t count = 0;
  for (const auto& [name, tensor] : rank.final_params) count += tensor.numel();
  return count;
}

RunPrecision precision_of(const RunConfig& config) {
  return {config.train.precision, config.train.grad_dtype};
}

class ModelStateTest : public ::testing::Test {
 protected:
  // The per-rank model-state bytes per parameter: Giant's accounting within
  // 5% of the formula on every rank. ZeRO-3's peak also holds the layers
  // gathered at once: up to `gathered_parameters` more in the compute dtype.
  void expect_formula(const Layout& layout, double gathered_parameters = 0) {
    const RunConfig config = runner_.config(layout);
    const RunResult result = runner_.run(layout);
    const RunPrecision precision = precision_of(config);
    const double formula = planner::model_state_bytes_per_parameter(layout.zero, layout.dp, precision);
    for (const auto& rank : result.ranks) {
      const MemoryUse& peak = rank.summary.memory_peak;
      const auto parameters = static_cast<double>(parameter_count(rank));
      const double per_parameter = static_cast<double>(peak.model_states()) / parameters;
      const double gathered = gathered_parameters * precision.compute_bytes() / parameters;
      const std::string what = layout.name() + " dp rank " + std::to_string(rank.dp_rank) + ": parameters " +
                               std::to_string(peak.parameters) + ", gradients " + std::to_string(peak.gradients) +
                               ", optimizer state " + std::to_string(peak.optimizer_state) + " for " +
                               std::to_string(parameter_count(rank)) + " parameters; formula " +
                               std::to_string(formula) + " bytes each";
      EXPECT_GE(per_parameter, 0.95 * formula) << what;
      EXPECT_LE(per_parameter, 1.05 * formula + gathered) << what;
      EXPECT_GT(peak.activations, 0) << what;
      EXPECT_GT(peak.max_rss, 0) << what;
    }
  }

  LayoutRunner runner_{{"train.steps=2"}};
};

TEST_F(ModelStateTest, Fp32ZeroZeroHoldsSixteenBytesPerParameter) {
  for (int dp : {1, 2, 4}) expect_formula({dp, 1, /*zero=*/0});
}

TEST_F(ModelStateTest, Fp32ZeroOneShardsTheOptimizerState) {
  for (int dp : {1, 2, 4}) expect_formula({dp, 1, /*zero=*/1});
}

// Mixed precision: bf16 weights (2 bytes), fp32 gradients (train.grad_dtype,
// 4) and fp32 masters beside the moments (4 + 8, sharded from ZeRO-1 on).
TEST_F(ModelStateTest, MixedPrecisionCountsTheComputeCopyAndTheMasters) {
  for (int zero : {0, 1}) {
    for (int dp : {1, 2, 4}) {
      Layout layout{dp, 1, zero};
      layout.precision = "bf16";
      expect_formula(layout);
    }
  }
}

// ZeRO-2: 4 + (4 + 8)/d, from GradientReducer's own accounting (the owned
// gradient shards; its staging buffers are comm buffers, outside the formula).
TEST_F(ModelStateTest, ZeroTwoShardsTheGradientsToo) {
  for (int dp : {1, 2, 4}) expect_formula({dp, 1, /*zero=*/2});
}

// ZeRO-3: 16/d plus the gathered working set.
TEST_F(ModelStateTest, ZeroThreeShardsEverythingAndHoldsTheGatheredLayers) {
  // The small job's largest layer is a block (12 h^2 + 13 h, h = 32); the
  // running one and parallel.zero3_prefetch = 1 ahead are gathered at once,
  // and the tied embedding (256 x 32) stays gathered from its forward to
  // the head's backward.
  const double block = 12.0 * 32 * 32 + 13 * 32, embedding = 256.0 * 32;
  for (int dp : {1, 2, 4}) expect_formula({dp, 1, /*zero=*/3}, /*gathered_parameters=*/2 * block + embedding);
}

int64_t activation_peak(const std::vector<std::string>& keys) {
  LayoutRunner runner(keys);
  return runner.run({1, 1, 0}).ranks[0].summary.memory_peak.activations;
}

TEST(MeasuredActivations, GrowWithTheMicroBatch) {
  const int64_t two = activation_peak({"train.steps=2", "train.micro_batch=2"});
  const int64_t eight = activation_peak({"train.steps=2", "train.micro_batch=8"});
  EXPECT_GT(two, 0);
  EXPECT_GT(eight, 2 * two) << two << " bytes at micro-batch 2, " << eight << " at 8";
}

// Recomputation keeps less: none > selective > full.
TEST(MeasuredActivations, RecomputationOrdersThem) {
  // Sequences long enough that the blocks' activations outweigh the logits
  // and the gradients.
  const std::vector<std::string> keys{"train.steps=2", "model.seq_len=64", "train.micro_batch=8"};
  auto with = [&](const char* recompute) {
    std::vector<std::string> k = keys;
    k.push_back(std::string("train.recompute=\"") + recompute + "\"");
    return k;
  };
  const int64_t none = activation_peak(with("none"));
  const int64_t selective = activation_peak(with("selective"));
  const int64_t full = activation_peak(with("full"));
  std::printf("activation peak: none %lld, selective %lld, full %lld bytes\n", static_cast<long long>(none),
              static_cast<long long>(selective), static_cast<long long>(full));
  EXPECT_GT(none, selective);
  EXPECT_GT(selective, full);
}

TEST(MemoryReport, TheLogMetricsAndTensorBoardCarryEachKind) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; text.size() < 400; ++i) text += "In the beginning " + std::to_string(i * 7 % 13) + ". ";
  const std::vector<std::string> keys{
      "model.layers=1",        "model.hidden=32",       "model.heads=2",         "model.seq_len=16",
      "train.global_batch=4",  "train.micro_batch=2",   "train.threads=1",       "train.eval_every=0",
      "train.eval_batches=1",  "train.sample_tokens=0", "data.val_fraction=0.5", "train.steps=3",
      "train.tensorboard=true", "data.path=\"" + dir.file("text.txt", text) + "\"",
      "train.out_dir=\"" + dir.path() + "/out\""};
  std::ostringstream out;
  const TrainSummary summary = Trainer(run_config_from(test::keys_with(keys)), "", out, false).run();
  const std::string log = out.str();
  EXPECT_NE(log.find("memory after step 1 (this rank): parameters "), std::string::npos) << log;
  EXPECT_NE(log.find("memory peak over the run (this rank): parameters "), std::string::npos) << log;

  const char* kinds[] = {"parameters", "gradients", "optimizer_state", "activations", "comm_buffers", "total"};
  std::ifstream metrics(dir.path() + "/out/metrics.jsonl");
  int steps = 0, summaries = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    const char* field = record.contains("summary") ? "peak_memory_bytes" : "memory_bytes";
    if (!record.contains("summary") && !record.contains("loss")) continue;
    ASSERT_TRUE(record.contains(field)) << line;
    for (const char* kind : kinds) EXPECT_TRUE(record[field].contains(kind)) << kind << " in " << line;
    EXPECT_GT(record[field]["parameters"].get<int64_t>(), 0) << line;
    EXPECT_GT(record[field]["activations"].get<int64_t>(), 0) << line;
    if (record.contains("summary")) {
      ++summaries;
      EXPECT_EQ(record[field]["total"].get<int64_t>(), summary.memory_peak.total());
      EXPECT_EQ(record["max_rss_bytes"].get<int64_t>(), summary.memory_peak.max_rss);
    } else {
      ++steps;
    }
  }
  EXPECT_EQ(steps, 3);
  EXPECT_EQ(summaries, 1);
  // No reducer here: the optimizer's two moments are twice the fp32 weights.
  EXPECT_EQ(summary.memory_peak.optimizer_state, 2 * summary.memory_peak.parameters);
  EXPECT_EQ(summary.memory_peak.gradients, summary.memory_peak.parameters);

  const auto files = test::event_files(dir.path() + "/out/tensorboard");
  ASSERT_EQ(files.size(), 1u);
  std::map<std::string, int> points;
  for (const auto& scalar : test::decode(files[0])) ++points[scalar.tag];
  for (const char* kind : kinds) EXPECT_EQ(points[std::string("memory/") + kind], 3) << kind;
}

}  // namespace
}  // namespace giant::train
