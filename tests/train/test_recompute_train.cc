// train.recompute through the trainer: full and selective recomputation give
// bitwise the first step's gradients and the final parameters of none, in a
// single process (with dropout too: the recomputation draws the forward's
// masks again; and in bf16), over a pipeline of two stages (the executor calls backward
// on stage outputs; the 1F1B schedule runs forwards between a micro-batch's
// forward and backward) and over two tensor-parallel ranks (the layers'
// collectives run again in the recomputation, in the same order on both).
// Ranks run as threads sharing one CPU generator, so their runs keep dropout
// at 0. A bad value is a ConfigError naming the key.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <deque>
#include <set>

#include "giant/base/error.h"
#include "giant/train/stage_model.h"
#include "train/support/layout_runner.h"

namespace giant::train {
namespace {

using test::Layout;
using test::RunResult;

std::vector<std::string> with_recompute(const char* choice, std::vector<std::string> keys) {
  keys.push_back(std::string("train.recompute=\"") + choice + "\"");
  keys.push_back("train.steps=6");
  return keys;
}

void expect_bitwise_equal(const RunResult& got, const RunResult& expected) {
  ASSERT_EQ(got.ranks.size(), expected.ranks.size());
  EXPECT_EQ(got.losses, expected.losses);
  for (size_t r = 0; r < got.ranks.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& mine = got.ranks[r];
    const auto& theirs = expected.ranks[r];
    ASSERT_EQ(mine.first_grads.size(), theirs.first_grads.size());
    ASSERT_FALSE(mine.first_grads.empty());
    for (const auto& [name, grad] : theirs.first_grads) {
      ASSERT_TRUE(mine.first_grads.count(name)) << name;
      EXPECT_TRUE(torch::equal(mine.first_grads.at(name), grad)) << "first gradient of " << name;
    }
    for (const auto& [name, value] : theirs.final_params) {
      ASSERT_TRUE(mine.final_params.count(name)) << name;
      EXPECT_TRUE(torch::equal(mine.final_params.at(name), value)) << "final value of " << name;
    }
  }
}

void expect_recomputation_changes_nothing(const Layout& layout, const std::vector<std::string>& keys) {
  const RunResult none = test::LayoutRunner(with_recompute("none", keys)).run(layout);
  ASSERT_EQ(none.losses.size(), 6u);
  for (const char* choice : {"selective", "full"}) {
    SCOPED_TRACE(choice);
    expect_bitwise_equal(test::LayoutRunner(with_recompute(choice, keys)).run(layout), none);
  }
}

TEST(RecomputeTraining, SingleProcessIsBitwiseUnchanged) {
  torch::set_num_threads(1);
  expect_recomputation_changes_nothing(Layout{1, 1}, {});
}

TEST(RecomputeTraining, SingleProcessWithDropoutIsBitwiseUnchanged) {
  torch::set_num_threads(1);
  expect_recomputation_changes_nothing(Layout{1, 1}, {"model.dropout=0.2", "train.micro_batch=1"});
}

TEST(RecomputeTraining, SingleProcessInBf16IsBitwiseUnchanged) {
  torch::set_num_threads(1);
  Layout layout;
  layout.precision = "bf16";
  expect_recomputation_changes_nothing(layout, {});
}

TEST(RecomputeTraining, TwoPipelineStagesAreBitwiseUnchanged) {
  torch::set_num_threads(1);
  Layout layout;
  layout.pp = 2;
  expect_recomputation_changes_nothing(layout, {"train.micro_batch=1"});  // four micro-batches, two in flight
}

TEST(RecomputeTraining, TwoTensorParallelRanksAreBitwiseUnchanged) {
  torch::set_num_threads(1);
  expect_recomputation_changes_nothing(Layout{1, 2}, {});
}

TEST(RecomputeTraining, DataParallelWithShardedOptimizerIsBitwiseUnchanged) {
  torch::set_num_threads(1);
  Layout layout{2, 1};
  layout.zero = 1;
  expect_recomputation_changes_nothing(layout, {});
}

// The recomputations behind `output`: "block" when it is the output's own
// node, "inside" for one further back.
std::multiset<std::string> recomputations_behind(const torch::Tensor& output) {
  std::multiset<std::string> found;
  std::set<torch::autograd::Node*> seen;
  std::deque<torch::autograd::Node*> queue{output.grad_fn().get()};
  while (!queue.empty()) {
    torch::autograd::Node* node = queue.front();
    queue.pop_front();
    if (node == nullptr || !seen.insert(node).second) continue;
    if (node->name().find("Recomputed") != std::string::npos) {
      found.insert(node == output.grad_fn().get() ? "block" : "inside");
    }
    for (const auto& edge : node->next_edges()) queue.push_back(edge.function.get());
  }
  return found;
}

// What the trainer builds: the stage model from the run's layer list.
TEST(RecomputeTraining, TheRunsBlocksRecomputeAsTrainRecomputeSays) {
  const std::map<std::string, std::multiset<std::string>> expected{
      {"none", {}}, {"selective", {"inside"}}, {"full", {"block"}}};
  for (const auto& [choice, nodes] : expected) {
    SCOPED_TRACE(choice);
    const RunConfig config = run_config_from(test::keys_with(
        {"model.layers=1", "model.hidden=16", "model.heads=2", "model.seq_len=8",
         std::string("train.recompute=\"") + choice + "\""}));
    StageModel model = build_stage_model(config, run_layer_list(config), 0, {});
    model.chunks[0]->train();
    torch::nn::AnyModule& block = model.chunks[0]->layer(1);
    const torch::Tensor x = torch::randn({2, 8, 16}).requires_grad_(true);
    EXPECT_EQ(recomputations_behind(block.forward<torch::Tensor>(x)), nodes);
  }
}

TEST(RecomputeTraining, ABadChoiceNamesTheKey) {
  try {
    run_config_from(test::keys_with({"train.recompute=\"some\""}));
    FAIL() << "no error for train.recompute = some";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "train.recompute");
    EXPECT_NE(std::string(e.what()).find("none, selective or full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(run_config_from(test::keys_with({"train.recompute=\"full\""})).layout.recompute, Recompute::full);
}

}  // namespace
}  // namespace giant::train
