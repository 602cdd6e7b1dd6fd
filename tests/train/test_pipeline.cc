// Pipeline layouts reproduce the single process: for (dp, pp, tp) in
// {(1,2,1), (1,4,1), (2,2,1), (1,2,2), (2,2,2)} and each schedule
// (interleaved with two virtual stages where the layers allow), the loss and
// every parameter's gradient after one step within the rounding model's
// bounds (train/support/layout_bounds.h; relative norm per tensor, a shard against the slice of the whole gradient; the head's
// copy of the tied embedding against the embedding's), the losses over 20
// steps, and the tied embedding bitwise equal on the
// first and the last stage at every step. Ranks run as threads; dropout 0,
// fp32, gradient clipping on. ZeRO-1 (parallel.zero=1) under pp is checked
// against the same layout without it, as the dp test does: bitwise equal
// without clipping. bf16 under pp against the single bf16 process with the
// same model's bf16 bounds.
#include <gtest/gtest.h>

#include <set>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/models/gpt.h"
#include "giant/train/trainer.h"
#include "train/support/layout_bounds.h"
#include "train/support/layout_runner.h"

namespace giant::train {
namespace {

using test::expected_shard;
using test::Layout;
using test::layout_bounds;
using test::LayoutBounds;
using test::RankResult;
using test::reference_name;
using test::relative_error;
using test::RunResult;

// Six blocks: nine layers, enough for pp=4 with two virtual stages.
const std::vector<std::string> kSixBlocks{"model.layers=6"};

std::string describe(const Layout& l) {
  return "dp " + std::to_string(l.dp) + " pp " + std::to_string(l.pp) + " tp " + std::to_string(l.tp) + " " +
         l.schedule + (l.virtual_stages > 1 ? " v=" + std::to_string(l.virtual_stages) : "") + " zero " +
         std::to_string(l.zero) + " " + l.precision + (l.clip ? "" : " without clipping");
}

// Every gradient of every rank against the single process; every reference
// parameter is held by some rank.
double check_gradients(const RunResult& result, const RankResult& reference, const Layout& layout, double bound) {
  double worst = 0;
  std::set<std::string> seen;
  for (const RankResult& rank : result.ranks) {
    for (const auto& [name, grad] : rank.first_grads) {
      const std::string whole = reference_name(name);
      seen.insert(whole);
      const torch::Tensor expected = expected_shard(name, reference.first_grads.at(whole), rank.tp_rank, layout.tp);
      EXPECT_EQ(grad.sizes(), expected.sizes()) << name;
      if (grad.sizes() != expected.sizes()) continue;
      const double error = relative_error(grad.to(torch::kFloat), expected.to(torch::kFloat));
      worst = std::max(worst, error);
      EXPECT_LE(error, bound) << name << " on dp " << rank.dp_rank << " pp " << rank.pp_rank << " tp "
                              << rank.tp_rank;
    }
  }
  EXPECT_EQ(seen.size(), reference.first_grads.size()) << "parameters missing from every rank";
  return worst;
}

// The first stage's embedding and the last stage's copy, bitwise, at every step.
void check_tied_weights(const RunResult& result, const Layout& layout) {
  for (const RankResult& first : result.ranks) {
    if (first.pp_rank != 0) continue;
    for (const RankResult& last : result.ranks) {
      if (last.pp_rank != layout.pp - 1 || last.dp_rank != first.dp_rank || last.tp_rank != first.tp_rank) continue;
      ASSERT_EQ(first.tied_weight.size(), 20u);
      ASSERT_EQ(last.tied_weight.size(), 20u);
      for (size_t step = 0; step < first.tied_weight.size(); ++step) {
        EXPECT_TRUE(torch::equal(first.tied_weight[step], last.tied_weight[step]))
            << "tied embedding differs at step " << step + 1 << " on dp " << first.dp_rank << " tp "
            << first.tp_rank;
      }
    }
  }
}

double check_losses(const RunResult& result, const RunResult& single, double bound) {
  EXPECT_EQ(result.losses.size(), single.losses.size());
  double worst = 0;
  for (size_t step = 0; step < std::min(result.losses.size(), single.losses.size()); ++step) {
    const double error = std::abs(result.losses[step] - single.losses[step]) / single.losses[step];
    EXPECT_LE(error, bound) << "step " << step + 1;
    worst = std::max(worst, error);
  }
  return worst;
}

TEST(PipelineLayouts, EveryScheduleReproducesTheSingleProcess) {
  torch::set_num_threads(1);
  const test::LayoutRunner runner(kSixBlocks);
  const RunResult single = runner.run({});
  ASSERT_EQ(single.losses.size(), 20u);
  EXPECT_LT(single.losses.back(), single.losses.front());
  struct Shape {
    int dp, pp, tp;
  };
  for (Shape shape : {Shape{1, 2, 1}, Shape{1, 4, 1}, Shape{2, 2, 1}, Shape{1, 2, 2}, Shape{2, 2, 2}}) {
    for (const char* schedule : {"gpipe", "1f1b", "interleaved"}) {
      Layout layout;
      layout.dp = shape.dp;
      layout.pp = shape.pp;
      layout.tp = shape.tp;
      layout.schedule = schedule;
      layout.virtual_stages = std::string(schedule) == "interleaved" ? 2 : 1;
      SCOPED_TRACE(describe(layout));
      const RunResult result = runner.run(layout);
      const LayoutBounds bound = layout_bounds(runner.config(layout));
      const double worst_loss = check_losses(result, single, bound.loss);
      const double worst_grad = check_gradients(result, single.ranks[0], layout, bound.first_gradient);
      check_tied_weights(result, layout);
      std::printf("%s: worst gradient relative error %.2e (bound %.2e), worst loss relative error %.2e (bound %.2e)\n",
                  describe(layout).c_str(), worst_grad, bound.first_gradient, worst_loss, bound.loss);
    }
  }
}

TEST(PipelineLayouts, ShardedOptimizerAndBf16ComposeWithThePipeline) {
  torch::set_num_threads(1);
  const test::LayoutRunner runner(kSixBlocks);
  // ZeRO-1 per stage against the same layout without it, without clipping: bitwise.
  Layout plain;
  plain.dp = 2;
  plain.pp = 2;
  plain.clip = false;
  Layout sharded = plain;
  sharded.zero = 1;
  const RunResult expected = runner.run(plain);
  const RunResult result = runner.run(sharded);
  ASSERT_EQ(result.ranks.size(), expected.ranks.size());
  for (size_t r = 0; r < result.ranks.size(); ++r) {
    for (const auto& [name, value] : result.ranks[r].final_params) {
      EXPECT_TRUE(torch::equal(value, expected.ranks[r].final_params.at(name))) << name << " on rank " << r;
    }
  }
  check_tied_weights(result, sharded);

  // bf16 under pp against the single bf16 process.
  Layout single_bf16;
  single_bf16.precision = "bf16";
  const RunResult reference = runner.run(single_bf16);
  for (int zero : {0, 1}) {
    Layout bf16 = single_bf16;
    bf16.dp = 2;
    bf16.pp = 2;
    bf16.zero = zero;
    SCOPED_TRACE(describe(bf16));
    const RunResult run = runner.run(bf16);
    const LayoutBounds bound = layout_bounds(runner.config(bf16));
    const double worst_loss = check_losses(run, reference, bound.loss);
    const double worst_grad = zero == 0 ? check_gradients(run, reference.ranks[0], bf16, bound.first_gradient) : 0;
    std::printf("%s: worst gradient relative error %.2e (bound %.2e), worst loss relative error %.2e (bound %.2e)\n",
                describe(bf16).c_str(), worst_grad, bound.first_gradient, worst_loss, bound.loss);
    check_tied_weights(run, bf16);
  }
}

// Evaluation (a forward-only schedule) and the final sample (one token at a
// time through the pipeline) give the single process's validation loss
// (within the model's loss bound) and text, on every rank.
TEST(PipelineLayouts, EvaluationAndTheSampleComeFromTheLastStage) {
  torch::set_num_threads(1);
  const test::LayoutRunner runner(
      {"model.layers=6", "train.steps=3", "train.eval_batches=3", "train.sample_tokens=24"});
  const RunResult single = runner.run({});
  ASSERT_EQ(single.ranks[0].summary.sample.size() > 0, true);
  Layout interleaved;
  interleaved.pp = 2;
  interleaved.tp = 2;
  interleaved.schedule = "interleaved";
  interleaved.virtual_stages = 2;
  for (const Layout& layout : {Layout{1, 1, 0, true, "fp32", 2}, interleaved}) {
    SCOPED_TRACE(describe(layout));
    const RunResult result = runner.run(layout);
    const double bound = layout_bounds(runner.config(layout)).loss;
    for (const RankResult& rank : result.ranks) {
      EXPECT_NEAR(rank.summary.val_loss, single.ranks[0].summary.val_loss, bound * single.ranks[0].summary.val_loss)
          << "pp rank " << rank.pp_rank;
      EXPECT_EQ(rank.summary.sample, single.ranks[0].summary.sample) << "pp rank " << rank.pp_rank;
      EXPECT_NEAR(rank.summary.last_loss, single.ranks[0].summary.last_loss, bound * single.ranks[0].summary.last_loss);
    }
  }
}

TEST(PipelineLayouts, BadPipelinesNameTheKeyBeforeAnyWork) {
  auto key_of = [](std::vector<std::string> overrides, int world_size) {
    return test::error_key([&] { check_layout(run_config_from(test::keys_with(overrides)), world_size); });
  };
  EXPECT_EQ(key_of({"parallel.pp=2", "train.micro_batch=8"}, 2), "none");
  // More stages than layers: 2 blocks are 5 layers.
  EXPECT_EQ(key_of({"parallel.pp=6", "model.layers=2", "train.micro_batch=8"}, 6), "parallel.pp");
  // A partition that leaves a stage empty.
  EXPECT_EQ(key_of({"parallel.pp=2", "model.layers=2", "train.micro_batch=8", "parallel.partition=\"manual:5,0\""},
                   2),
            "parallel.partition");
  EXPECT_EQ(key_of({"parallel.pp=2", "model.layers=2", "train.micro_batch=8", "parallel.partition=\"manual:2,2\""},
                   2),
            "parallel.partition");
  EXPECT_EQ(key_of({"parallel.pp=2", "train.micro_batch=8", "parallel.partition=\"bogus\""}, 2),
            "parallel.partition");
  // Interleaved with a micro-batch count it cannot schedule (16 / 8 = 2, not a multiple of pp = 4).
  EXPECT_EQ(key_of({"parallel.pp=4", "model.layers=6", "train.micro_batch=8", "parallel.schedule=\"interleaved\"",
                    "parallel.virtual_stages=2"},
                   4),
            "train.global_batch");
  // Virtual stages without interleaved.
  EXPECT_EQ(key_of({"parallel.pp=2", "train.micro_batch=8", "parallel.virtual_stages=2"}, 2),
            "parallel.virtual_stages");
  // dp x pp x tp against the ranks started.
  EXPECT_EQ(key_of({"parallel.pp=2", "train.micro_batch=8"}, 4), "parallel.dp");
}

}  // namespace
}  // namespace giant::train
