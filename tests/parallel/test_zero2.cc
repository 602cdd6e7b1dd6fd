// ZeRO stage 2 in GradientReducer over world sizes 1 to 5, on exact inputs
// (small integers: every sum is exact, each micro-batch's average within one
// rounding, their sum over 3 micro-batches two more, the expected value one:
// gamma_4 of fp32 element by element, support/rounding.h):
// each micro-batch's gradients reduced through hooks into the owned shards,
// no whole gradient kept, rounds completed when a parameter gets no
// gradient, and the same shards as stage 1 for one micro-batch.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/data_parallel/gradient_reducer.h"
#include "parallel/support/rank_threads.h"
#include "support/rounding.h"

namespace giant::parallel {
namespace {

using test::run_ranks;

const std::vector<std::vector<int64_t>> kShapes{{3, 5}, {7}, {2, 2, 3}, {1}, {4, 9}, {101, 97}, {9001}};
constexpr int64_t kBucketBytes = 64;

std::vector<torch::Tensor> make_parameters() {
  std::vector<torch::Tensor> parameters;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const int64_t n = c10::multiply_integers(kShapes[i]);
    parameters.push_back((torch::arange(n, torch::kFloat) + 100.0 * i).reshape(kShapes[i]).requires_grad_(true));
  }
  return parameters;
}
// Rank r's gradient of parameter i in micro-batch m: (r + 1) (m + 1) (k % 5 + 1 + i).
torch::Tensor local_gradient(size_t i, int rank, int micro_batch) {
  const int64_t n = c10::multiply_integers(kShapes[i]);
  return ((torch::arange(n, torch::kFloat).remainder(5) + 1 + static_cast<double>(i)) * (rank + 1) *
          (micro_batch + 1))
      .reshape(kShapes[i]);
}

// One backward whose gradients are exactly local_gradient (skipping `unused`).
void backward(const std::vector<torch::Tensor>& parameters, int rank, int micro_batch, int unused = -1) {
  torch::Tensor loss = torch::zeros({});
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (static_cast<int>(i) == unused) continue;
    loss = loss + (parameters[i] * local_gradient(i, rank, micro_batch)).sum();
  }
  loss.backward();
}

TEST(Zero2, ReducesEveryMicroBatchIntoTheOwnedShards) {
  for (int size = 1; size <= 5; ++size) {
    std::mutex mutex;
    int64_t owned_total = 0;
    run_ranks(size, [&](ccl::Communicator& comm) {
      auto parameters = make_parameters();
      GradientReducer reducer(parameters, comm, kBucketBytes, /*zero_stage=*/2);
      EXPECT_EQ(reducer.zero_stage(), 2);
      EXPECT_THROW(reducer.grad_view(0), Error);
      constexpr int kMicroBatches = 3;
      for (int step = 0; step < 2; ++step) {
        reducer.zero_grad();
        for (int m = 0; m < kMicroBatches; ++m) {
          reducer.begin_micro_batch(m + 1 == kMicroBatches);
          backward(parameters, comm.rank(), m, /*unused=*/m == 1 ? 3 : -1);
          // No whole gradient is left on the parameters.
          for (const auto& p : parameters) EXPECT_FALSE(p.grad().defined());
        }
        reducer.finish();
        int64_t mine = 0;
        const std::vector<UpdatePiece> pieces = reducer.update_pieces();
        for (size_t k = 0; k < pieces.size(); ++k) {
          const size_t i = pieces[k].parameter;
          const at::Tensor& owned = pieces[k].tensor;
          EXPECT_FALSE(pieces[k].whole);
          // sum over m of the mean over ranks: (size + 1) / 2 x (1 + 2 + 3), parameter 3 missing m = 1.
          const double factor = (size + 1) / 2.0 * (i == 3 ? 1 + 3 : 1 + 2 + 3);
          const torch::Tensor expected =
              (local_gradient(i, 0, 0) * factor).reshape({-1}).narrow(0, pieces[k].offset, owned.numel());
          EXPECT_TRUE(torch::allclose(owned.grad(), expected, giant::test::gamma(4, giant::test::unit_roundoff(Precision::fp32)), 0))
              << "stretch " << k << " of parameter " << i << ", rank " << comm.rank() << " of " << size;
          mine += owned.numel();
        }
        if (step == 0) {
          std::lock_guard<std::mutex> lock(mutex);
          owned_total += mine;
        }
      }
    });
    int64_t elements = 0;
    for (const auto& shape : kShapes) elements += c10::multiply_integers(shape);
    EXPECT_EQ(owned_total, elements) << "size " << size;
  }
}

// At dp = 2 (each element the sum of two values, in either order); more
// ranks may add in another order (stage 1 reduces in shared buffers).
TEST(Zero2, OneMicroBatchGivesStageOnesShardsBitwise) {
  for (int size : {2}) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      auto first = make_parameters(), second = make_parameters();
      GradientReducer stage1(first, comm, kBucketBytes, 1);
      GradientReducer stage2(second, comm, kBucketBytes, 2);
      for (auto* reducer : {&stage1, &stage2}) {
        reducer->zero_grad();
        reducer->begin_micro_batch(true);
      }
      // Gradients that do not divide exactly: the averages round.
      for (auto [reducer, parameters] : {std::pair{&stage1, &first}, {&stage2, &second}}) {
        torch::Tensor loss = torch::zeros({});
        for (size_t i = 0; i < parameters->size(); ++i) {
          loss = loss + ((*parameters)[i] * local_gradient(i, comm.rank(), 0) / 7.0).sin().sum();
        }
        loss.backward();
        reducer->finish();
      }
      const std::vector<UpdatePiece> ones = stage1.update_pieces(), twos = stage2.update_pieces();
      ASSERT_EQ(ones.size(), twos.size());
      for (size_t k = 0; k < ones.size(); ++k) {
        const at::Tensor one = ones[k].tensor.grad(), two = twos[k].tensor.grad();
        EXPECT_TRUE(torch::equal(one, two)) << "stretch " << k << " rank " << comm.rank() << " of " << size << ": "
                                            << (one - two).abs().max().item<float>();
      }
    });
  }
}

TEST(Zero2, HoldsShardsOfTheGradientsAndAFewStagingBuffers) {
  for (int size : {2, 4}) {
    std::mutex mutex;
    std::map<int, HeldBytesReport> by_stage;
    run_ranks(size, [&](ccl::Communicator& comm) {
      for (int stage : {1, 2}) {
        auto parameters = make_parameters();
        GradientReducer reducer(parameters, comm, kBucketBytes, stage);
        for (int step = 0; step < 2; ++step) {
          reducer.zero_grad();
          for (int m = 0; m < 2; ++m) {
            reducer.begin_micro_batch(m == 1);
            backward(parameters, comm.rank(), m);
          }
          reducer.finish();
        }
        if (comm.rank() == 0) {
          std::lock_guard<std::mutex> lock(mutex);
          by_stage[stage] = reducer.held_bytes();
        }
      }
    });
    int64_t elements = 0;
    for (const auto& shape : kShapes) elements += c10::multiply_integers(shape);
    const int64_t whole = elements * 4;
    // Stage 1 keeps whole (padded) buckets; stage 2 a 1/size share of them.
    EXPECT_GE(by_stage[1].now.gradients, whole);
    EXPECT_LE(by_stage[2].now.gradients, whole / size + 4 * size * 8);
    EXPECT_GE(by_stage[2].now.gradients, whole / size);
    EXPECT_EQ(by_stage[1].peak.comm_buffers, 0);
    // Staging: the pool's three buffers of the largest bucket (101 x 97 floats, padded).
    EXPECT_GT(by_stage[2].peak.comm_buffers, 0);
    EXPECT_LE(by_stage[2].peak.comm_buffers, 3 * 9800 * 4) << "size " << size;
    // The parameters stay whole at both stages.
    EXPECT_EQ(by_stage[1].now.parameters, by_stage[2].now.parameters);
  }
}

}  // namespace
}  // namespace giant::parallel
