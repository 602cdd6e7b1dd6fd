// ZeRO stages 2 and 3 against ZeRO-0 through the trainer, at (dp, tp, pp) in
// {(2,1,1), (2,2,1), (2,1,2)}, fp32, dropout 0, ranks as threads, 10 steps.
// With one micro-batch per step the stages add the same two values per
// element (dp = 2) and the final parameters are bitwise equal without
// clipping; with clipping the gradient norm sums the owners' stretches in
// another order (in double: within 1e-16, so the clipping scale rounds to
// the same float) and the bound is 1e-6 per-tensor relative norm (measured:
// bitwise). With two micro-batches stages 2 and 3 reduce each micro-batch,
// summing over micro-batches after the average over ranks rather than before
// (DeepSpeed's order too): each gradient differs in its last bits, which
// AdamW's normalisation magnifies on the smallest ones (the biases) to about
// 1e-4 after 10-20 steps; the bound there is 2e-4.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include <torch/torch.h>

#include "train/support/layout_runner.h"

namespace giant::train {
namespace {

using test::Layout;
using test::relative_error;
using test::RunResult;

struct Shape {
  int dp, tp, pp;
};

std::string describe(const Layout& l) {
  return "dp " + std::to_string(l.dp) + " tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp) + " zero " +
         std::to_string(l.zero) + (l.clip ? "" : " without clipping");
}

// The worst per-tensor relative error of the final parameters against
// `expected`, rank by rank (the same layout: the same names on each).
double compare_final(const RunResult& result, const RunResult& expected, double bound, const Layout& layout) {
  double worst = 0;
  EXPECT_EQ(result.ranks.size(), expected.ranks.size());
  for (size_t r = 0; r < result.ranks.size() && r < expected.ranks.size(); ++r) {
    for (const auto& [name, value] : result.ranks[r].final_params) {
      const torch::Tensor& other = expected.ranks[r].final_params.at(name);
      const double error = relative_error(value, other);
      worst = std::max(worst, error);
      if (bound == 0) {
        EXPECT_TRUE(torch::equal(value, other)) << name << " on rank " << r << ", " << describe(layout);
      } else {
        EXPECT_LE(error, bound) << name << " on rank " << r << ", " << describe(layout);
      }
    }
  }
  return worst;
}

// The stages checked against ZeRO-0 (each run shares the reference runs).
const std::vector<int> kStages{2};

TEST(ZeroLayouts, StagesTwoAndThreeReproduceStageZero) {
  torch::set_num_threads(1);
  for (Shape shape : {Shape{2, 1, 1}, Shape{2, 2, 1}, Shape{2, 1, 2}}) {
    for (int micro_batches : {1, 2}) {
      // dp 2 x micro_batch 2 sequences per micro-batch.
      const test::LayoutRunner runner(
          {"model.layers=4", "train.steps=10", "train.global_batch=" + std::to_string(4 * micro_batches)});
      // Accumulation changes only the order of the sums: clipping adds nothing there.
      for (bool clip : micro_batches == 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
        Layout reference;
        reference.dp = shape.dp;
        reference.tp = shape.tp;
        reference.pp = shape.pp;
        reference.clip = clip;
        const RunResult expected = runner.run(reference);
        for (int zero : kStages) {
          Layout sharded = reference;
          sharded.zero = zero;
          const RunResult result = runner.run(sharded);
          const double bound = micro_batches > 1 ? 2e-4 : clip ? 1e-6 : 0.0;
          const double worst = compare_final(result, expected, bound, sharded);
          std::printf("%s, %d micro-batch(es): worst final parameter relative error against zero=0 %.2e\n",
                      describe(sharded).c_str(), micro_batches, worst);
        }
      }
    }
  }
}

}  // namespace
}  // namespace giant::train
