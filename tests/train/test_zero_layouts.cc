// ZeRO stages 2 and 3 through the trainer against ZeRO 0 at (dp, tp, pp) =
// (2,1,1), (2,2,1), (2,1,2), ranks as threads (layout_runner.h), 20 steps, fp32.
//
// With one micro-batch per step (train.global_batch = dp x micro_batch) both
// average the same two values per element (ZeRO-0's bucket allreduce,
// ZeRO-2's per-bucket and ZeRO-3's per-layer reduce-scatter), so without
// clipping the final parameters are bitwise equal. Otherwise the runs group
// the gradient reduction differently (with clipping the gradient norm sums
// the owners' stretches in another order, in double, so the clipping scale
// rounds to the same float; with several micro-batches ZeRO-2 and 3 reduce
// each micro-batch, as DeepSpeed does, where ZeRO-0 sums them first), and
// each final parameter is held to the bound of train/support/layout_bounds.h
// for another grouping of the reduction (Reference::other_zero_stage): 20
// AdamW steps carry the gradients' rounding differences into the
// parameters, at most 2 e steps lr per element. The qkv bias is checked
// apart (see compare_final): softmax ignores the key bias, whose gradient
// is rounding noise, so AdamW's normalised steps there differ in full: at
// most 2 lr a step per element, in absolute terms. bf16 against bf16
// ZeRO-0: the same model at bf16's unit roundoff, the compute copies
// compared. zero3_regather off against on: the same arithmetic, bitwise.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "train/support/layout_bounds.h"
#include "train/support/layout_runner.h"

namespace giant::train {
namespace {

using test::Layout;
using test::LayoutBounds;
using test::RunResult;

// The worst relative norm error over every rank's final parameters, each
// held to `bounds` (or bitwise equal when `bounds` is null), but for the
// attention's qkv bias, whose worst element difference is reported apart
// (*worst_key_bias) and held to 2 steps lr: softmax is invariant to the key
// bias, whose true gradient is zero, so AdamW's normalised steps follow
// rounding noise there and any change of summation order shows in full.
double compare_final(const RunResult& result, const RunResult& reference, const LayoutBounds* bounds,
                     const std::string& what, std::string* worst_name = nullptr, double* worst_key_bias = nullptr) {
  std::string ignored;
  double ignored_bias = 0;
  if (worst_name == nullptr) worst_name = &ignored;
  if (worst_key_bias == nullptr) worst_key_bias = &ignored_bias;
  double worst = 0;
  EXPECT_EQ(result.ranks.size(), reference.ranks.size()) << what;
  for (size_t r = 0; r < result.ranks.size() && r < reference.ranks.size(); ++r) {
    EXPECT_EQ(result.ranks[r].final_params.size(), reference.ranks[r].final_params.size()) << what;
    for (const auto& [name, value] : result.ranks[r].final_params) {
      const torch::Tensor& expected = reference.ranks[r].final_params.at(name);
      if (bounds == nullptr) {
        EXPECT_TRUE(torch::equal(value, expected)) << name << " on rank " << r << ": " << what;
        continue;
      }
      const double error = test::relative_error(value, expected);
      if (name.find("qkv.tp_bias") != std::string::npos) {
        const double most = (value.to(torch::kDouble) - expected.to(torch::kDouble)).abs().max().item<double>();
        *worst_key_bias = std::max(*worst_key_bias, most);
        EXPECT_LE(most, 2 * bounds->steps_lr) << name << " on rank " << r << ": " << what;
        continue;
      }
      EXPECT_LE(error, bounds->parameter(expected)) << name << " on rank " << r << ": " << what;
      if (error > worst) {
        worst = error;
        *worst_name = name + " (bound " + std::to_string(bounds->parameter(expected)) + ")";
      }
    }
  }
  return worst;
}

std::string describe(const Layout& l) {
  return "dp " + std::to_string(l.dp) + " tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp);
}

const std::vector<Layout> kLayouts{{2, 1}, {2, 2}, {2, 1, 0, true, "fp32", 2}};

Layout with(Layout l, int zero, bool clip, const char* precision = "fp32") {
  l.zero = zero;
  l.clip = clip;
  l.precision = precision;
  return l;
}

const std::vector<int> kStages{2, 3};

LayoutBounds against_zero0(const test::LayoutRunner& runner, const Layout& layout) {
  return test::layout_bounds(runner.config(layout), test::Reference::other_zero_stage);
}

TEST(ZeroLayouts, OneMicroBatchPerStepMatchesZero0) {
  torch::set_num_threads(1);
  const test::LayoutRunner runner({"train.global_batch=4"});  // dp 2 x micro-batch 2
  for (const Layout& layout : kLayouts) {
    for (bool clip : {false, true}) {
      SCOPED_TRACE(describe(layout) + (clip ? " with clipping" : " without clipping"));
      const RunResult plain = runner.run(with(layout, 0, clip));
      for (int zero : kStages) {
        const RunResult sharded = runner.run(with(layout, zero, clip));
        ASSERT_EQ(sharded.losses.size(), 20u);
        EXPECT_LT(sharded.losses.back(), sharded.losses.front());
        std::string worst_name;
        double key_bias = 0;
        const std::string what = "zero=" + std::to_string(zero) + " against zero=0";
        const LayoutBounds bounds = against_zero0(runner, with(layout, zero, clip));
        const double worst = compare_final(sharded, plain, clip ? &bounds : nullptr, what, &worst_name, &key_bias);
        std::printf("%s, %s, one micro-batch%s: worst final parameter relative error %.2e (%s), qkv bias at most "
                    "%.2e apart\n",
                    what.c_str(), describe(layout).c_str(), clip ? ", clipping" : "", worst, worst_name.c_str(),
                    key_bias);
      }
    }
  }
}

TEST(ZeroLayouts, SeveralMicroBatchesMatchZero0WithinRounding) {
  torch::set_num_threads(1);
  const test::LayoutRunner runner;  // global batch 8: 2 micro-batches per rank
  for (const Layout& layout : kLayouts) {
    SCOPED_TRACE(describe(layout));
    const RunResult plain = runner.run(with(layout, 0, false));
    for (int zero : kStages) {
      const RunResult sharded = runner.run(with(layout, zero, false));
      std::string worst_name;
      double key_bias = 0;
      const std::string what = "zero=" + std::to_string(zero) + " against zero=0, 2 micro-batches";
      const LayoutBounds bounds = against_zero0(runner, with(layout, zero, false));
      const double worst = compare_final(sharded, plain, &bounds, what, &worst_name, &key_bias);
      std::printf("%s, %s: worst final parameter relative error %.2e (%s), qkv bias at most %.2e apart\n", what.c_str(),
                  describe(layout).c_str(), worst, worst_name.c_str(), key_bias);
    }
  }
}

TEST(ZeroLayouts, Zero3RegatherOffIsTheSameArithmetic) {
  torch::set_num_threads(1);
  const test::LayoutRunner regather;
  const test::LayoutRunner held({"parallel.zero3_regather=false"});
  for (const Layout& layout : {kLayouts[0], kLayouts[2]}) {
    SCOPED_TRACE(describe(layout));
    compare_final(held.run(with(layout, 3, true)), regather.run(with(layout, 3, true)), nullptr,
                  "zero3_regather off against on");
  }
}

// bf16 compute, fp32 gradient shards and masters: against bf16 ZeRO-0 (which
// sums the micro-batches' bf16 gradients in fp32 before one reduction).
TEST(ZeroLayouts, Zero3Bf16MatchesZero0Bf16) {
  torch::set_num_threads(1);
  const test::LayoutRunner runner;
  for (const Layout& layout : {kLayouts[0], kLayouts[2]}) {
    SCOPED_TRACE(describe(layout));
    const RunResult plain = runner.run(with(layout, 0, true, "bf16"));
    const RunResult sharded = runner.run(with(layout, 3, true, "bf16"));
    for (const auto& rank : sharded.ranks) {
      for (const auto& [name, value] : rank.final_params) EXPECT_EQ(value.scalar_type(), torch::kBFloat16) << name;
    }
    ASSERT_EQ(sharded.losses.size(), plain.losses.size());
    const LayoutBounds bounds = against_zero0(runner, with(layout, 3, true, "bf16"));
    double worst_loss = 0;
    for (size_t step = 0; step < plain.losses.size(); ++step) {
      worst_loss = std::max(worst_loss, std::abs(sharded.losses[step] - plain.losses[step]) / plain.losses[step]);
    }
    std::string worst_name;
    double key_bias = 0;
    const double worst = compare_final(sharded, plain, &bounds, "bf16 zero=3 against zero=0", &worst_name, &key_bias);
    EXPECT_LE(worst_loss, bounds.loss);
    std::printf("bf16 zero=3 against zero=0, %s: worst loss relative error %.2e (bound %.2e), final parameters %.2e "
                "(%s), qkv bias at most %.2e apart\n",
                describe(layout).c_str(), worst_loss, bounds.loss, worst, worst_name.c_str(), key_bias);
  }
}

}  // namespace
}  // namespace giant::train
