// The PowerSGD gradient wire (LowRankWire) over world sizes 1 to 5:
// an average of rank R comes out exact (within fp32 rounding of the
// products); vectors and small matrices are averaged whole; every rank gets
// bitwise the same result; with error feedback the running sum of the
// results follows the running sum of the exact averages within the mean
// residual, which stays bounded; the state saved and restored continues
// bitwise; a bad state is refused; a non-finite average comes out NaN and
// the next step is clean. And through GradientReducer at ZeRO 0 and 1.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/data_parallel/gradient_reducer.h"
#include "giant/parallel/data_parallel/low_rank_wire.h"
#include "parallel/support/rank_threads.h"

namespace giant::parallel {
namespace {

using test::run_ranks;

// Two matrices worth compressing at rank 2, one too small (3 x 4), a vector.
const std::vector<std::vector<int64_t>> kShapes{{40, 24}, {7}, {3, 4}, {16, 2, 9}};

std::vector<at::Tensor> make_parameters() {
  std::vector<at::Tensor> parameters;
  for (const auto& shape : kShapes) parameters.push_back(torch::zeros(shape).requires_grad_(true));
  return parameters;
}

// Rank r's gradient of parameter i at step t: a sum of R outer products of
// vectors shared by every rank, weighted by (r + 1) and t, so the average
// has rank R (as every rank's does).
at::Tensor low_rank_gradient(size_t i, int rank, int low_rank, int step) {
  const auto& shape = kShapes[i];
  const int64_t rows = shape[0], cols = c10::multiply_integers(shape) / rows;
  auto generator = at::detail::createCPUGenerator(1000 + i);  // the global one is shared by the rank threads
  const at::Tensor u = at::randn({rows, low_rank}, generator), v = at::randn({low_rank, cols}, generator);
  const at::Tensor weights = torch::arange(1, low_rank + 1, torch::kFloat).view({1, low_rank}) * (rank + 1) * (step + 1);
  return torch::mm(u * weights, v).reshape(shape);
}

at::Tensor random_gradient(size_t i, int rank, int step) {
  auto generator = at::detail::createCPUGenerator(7 * rank + 131 * step + 17 * i);
  return at::randn(kShapes[i], generator);
}

std::vector<at::Tensor> clones(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.clone());
  return out;
}

TEST(LowRankWire, OrthonormalizesColumnsAndZeroesDependentOnes) {
  torch::manual_seed(3);
  at::Tensor p = torch::randn({50, 4});
  orthonormalize_columns(p);
  EXPECT_TRUE(torch::allclose(torch::mm(p.t(), p), torch::eye(4), 0, 1e-5));
  at::Tensor q = torch::randn({30, 3});
  q.select(1, 2).copy_(q.select(1, 0) * 2 - q.select(1, 1));  // in the span of the first two
  orthonormalize_columns(q);
  EXPECT_EQ(q.select(1, 2).abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(torch::allclose(torch::mm(q.narrow(1, 0, 2).t(), q.narrow(1, 0, 2)), torch::eye(2), 0, 1e-5));
}

TEST(LowRankWire, AnAverageOfTheWireRankIsExactAndTheSameOnEveryRank) {
  constexpr int kRank = 2;
  for (int size = 1; size <= 5; ++size) {
    std::mutex mutex;
    std::vector<std::vector<at::Tensor>> results(size);
    run_ranks(size, [&](ccl::Communicator& comm) {
      auto parameters = make_parameters();
      LowRankWire wire(parameters, comm, kRank);
      // 40x24 and 16x18 shrink; 3x4 and the vector go whole.
      EXPECT_NEAR(wire.ratio(), (960 + 7 + 12 + 288) / double(2 * (40 + 24 + 16 + 18) + 7 + 12), 1e-9);
      for (int step = 0; step < 2; ++step) {
        std::vector<at::Tensor> gradients;
        for (size_t i = 0; i < kShapes.size(); ++i) gradients.push_back(low_rank_gradient(i, comm.rank(), kRank, step));
        wire.average(gradients);
        for (size_t i = 0; i < kShapes.size(); ++i) {
          const at::Tensor expected = low_rank_gradient(i, 0, kRank, step) * ((size + 1) / 2.0);
          const double scale = expected.abs().max().item<double>();
          EXPECT_TRUE(torch::allclose(gradients[i], expected, 0, 2e-5 * scale))
              << "parameter " << i << " step " << step << " rank " << comm.rank() << " of " << size << ": off by "
              << (gradients[i] - expected).abs().max().item<double>() / scale;
        }
        if (step == 1) {
          std::lock_guard<std::mutex> lock(mutex);
          results[comm.rank()] = clones(gradients);
        }
      }
    });
    for (int r = 1; r < size; ++r) {
      for (size_t i = 0; i < kShapes.size(); ++i) EXPECT_TRUE(torch::equal(results[r][i], results[0][i])) << r;
    }
  }
}

// Full-rank gradients (the same every step): the running sum of the
// results misses the running sum of the exact averages by the ranks' mean
// residual, which error feedback keeps bounded, so the relative miss falls
// as steps go on (without feedback it would stay at the approximation's).
TEST(LowRankWire, ErrorFeedbackMakesTheRunningSumConverge) {
  for (int size : {1, 3}) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      auto parameters = make_parameters();
      LowRankWire wire(parameters, comm, 1);
      at::Tensor exact = torch::zeros(kShapes[0]);
      for (int r = 0; r < size; ++r) exact += random_gradient(0, r, 0) / size;
      at::Tensor sum = torch::zeros(kShapes[0]);
      std::vector<double> miss;
      for (int step = 1; step <= 200; ++step) {
        std::vector<at::Tensor> gradients;
        for (size_t i = 0; i < kShapes.size(); ++i) gradients.push_back(random_gradient(i, comm.rank(), 0));
        wire.average(gradients);
        sum += gradients[0];
        miss.push_back(((sum - exact * step).norm() / (exact * step).norm()).item<double>());
      }
      // Measured: 0.96, then 0.31, 0.14 and 0.07 after 50, 100 and 200
      // steps: the residual stays at about 15 averages.
      EXPECT_GT(miss[0], 0.5) << "a rank-1 approximation of a random 40x24 matrix is far off";
      EXPECT_LT(miss[199], 0.1) << "after 200 steps";
      EXPECT_LT(miss[199], miss[49] / 3) << "the residual grows (with a bounded one the miss falls as 1/steps)";
    });
  }
}

TEST(LowRankWire, ASavedStateContinuesBitwiseAndABadOneIsRefused) {
  run_ranks(3, [&](ccl::Communicator& comm) {
    auto parameters = make_parameters();
    LowRankWire wire(parameters, comm, 2);
    auto step_gradients = [&](int step) {
      std::vector<at::Tensor> g;
      for (size_t i = 0; i < kShapes.size(); ++i) g.push_back(random_gradient(i, comm.rank(), step));
      return g;
    };
    for (int step = 0; step < 3; ++step) wire.average(step_gradients(step));
    const std::vector<uint8_t> state = wire.save();
    auto straight = step_gradients(3);
    wire.average(straight);

    LowRankWire resumed(parameters, comm, 2);
    resumed.restore(state);
    auto again = step_gradients(3);
    resumed.average(again);
    for (size_t i = 0; i < kShapes.size(); ++i) EXPECT_TRUE(torch::equal(again[i], straight[i])) << i;

    LowRankWire other_rank(parameters, comm, 1);
    EXPECT_THROW(other_rank.restore(state), Error);
    std::vector<uint8_t> truncated(state.begin(), state.end() - 4), trailing = state;
    trailing.push_back(0);
    EXPECT_THROW(resumed.restore(truncated), Error);
    EXPECT_THROW(resumed.restore(trailing), Error);
    EXPECT_THROW(resumed.restore({1, 2, 3}), Error);
    EXPECT_EQ(resumed.save(), wire.save()) << "a refused state changed nothing";
  });
}

TEST(LowRankWire, ANonFiniteAverageComesOutNaNAndTheNextStepIsClean) {
  run_ranks(2, [&](ccl::Communicator& comm) {
    auto parameters = make_parameters();
    LowRankWire wire(parameters, comm, 2);
    std::vector<at::Tensor> gradients;
    for (size_t i = 0; i < kShapes.size(); ++i) gradients.push_back(low_rank_gradient(i, comm.rank(), 2, 0));
    if (comm.rank() == 1) gradients[0][3][5] = std::numeric_limits<float>::infinity();
    wire.average(gradients);
    EXPECT_TRUE(torch::isnan(gradients[0]).all().item<bool>());
    EXPECT_TRUE(torch::isfinite(gradients[3]).all().item<bool>()) << "another matrix is untouched";
    for (size_t i = 0; i < kShapes.size(); ++i) gradients[i] = low_rank_gradient(i, comm.rank(), 2, 1);
    wire.average(gradients);
    const at::Tensor expected = low_rank_gradient(0, 0, 2, 1) * 1.5;
    EXPECT_TRUE(torch::allclose(gradients[0], expected, 0, 2e-5 * expected.abs().max().item<double>()));
  });
}

TEST(LowRankWire, GradientReducerAveragesThroughItAtZeroStagesZeroAndOne) {
  for (int zero : {0, 1}) {
    run_ranks(3, [&](ccl::Communicator& comm) {
      auto parameters = make_parameters();
      GradientReducer reducer(parameters, comm, /*bucket_bytes=*/256, zero, c10::nullopt, {}, nullptr, 2);
      reducer.zero_grad();
      reducer.begin_micro_batch(true);
      for (size_t i = 0; i < parameters.size(); ++i) {
        parameters[i].mutable_grad() = low_rank_gradient(i, comm.rank(), 2, 0);
      }
      reducer.finish();
      EXPECT_FALSE(reducer.wire_feedback().empty());
      for (const UpdatePiece& piece : reducer.update_pieces()) {
        EXPECT_TRUE(torch::isfinite(piece.tensor.grad()).all().item<bool>());
      }
      // The whole buckets hold the average (stage 1's blocks are views of them).
      for (size_t i = 0; i < parameters.size(); ++i) {
        const at::Tensor expected = low_rank_gradient(i, 0, 2, 0) * 2.0;
        EXPECT_TRUE(torch::allclose(reducer.grad_view(i), expected, 0, 2e-5 * expected.abs().max().item<double>()))
            << "parameter " << i << " at ZeRO " << zero;
      }
    });
  }
  run_ranks(2, [&](ccl::Communicator& comm) {
    auto parameters = make_parameters();
    EXPECT_THROW(GradientReducer(parameters, comm, 256, 2, c10::nullopt, {}, nullptr, 2), Error);
  });
}

}  // namespace
}  // namespace giant::parallel
