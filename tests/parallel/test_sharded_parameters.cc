// ZeRO-3 (ShardedParameters) on a small LayerStack of linear layers with odd
// sizes (blocks cut through parameters, the last padded), ranks as threads
// over world sizes 1-5. Each rank trains on its own inputs; an unsharded
// reference in the same thread computes every rank's gradients on the whole
// model and averages them the way the reduce-scatter does, micro-batch by
// micro-batch. At dp = 1 and 2 the sums are of at most two values, so the
// owned blocks and gradient shards must equal the reference's slices
// bitwise; at 3-5 ranks ccl may add in another order: two orders of a sum
// of n terms differ by at most 2 gamma_n (support/rounding.h) of the terms'
// magnitudes, element by element, here n = 5 ranks times 2 micro-batches;
// the terms are of the magnitude of the largest expected value, which
// bounds the absolute error where they cancel.
#include <gtest/gtest.h>

#include <mutex>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/data_parallel/sharded_parameters.h"
#include "giant/parallel/layer_list.h"
#include "parallel/support/linear_stack.h"
#include "parallel/support/rank_threads.h"
#include "support/rounding.h"

namespace giant::parallel {
namespace {

using test::run_ranks;

const auto& kLinears = test::linear_stack_shapes();
LayerStack make_stack() { return test::make_linear_stack(); }
torch::Tensor input_of(int rank, int micro_batch, int step) { return test::linear_stack_input(rank, micro_batch, step); }

torch::Tensor loss_of(const torch::Tensor& output) { return (output * output).sum(); }

std::vector<at::Tensor> parameters_of(LayerStack& stack) { return stack->parameters(); }

// The reference's gradients of one step: for each micro-batch the average
// over the ranks, summed over the micro-batches in order.
std::vector<torch::Tensor> reference_gradients(LayerStack& reference, int ranks, int micro_batches, int step) {
  auto parameters = parameters_of(reference);
  std::vector<torch::Tensor> total(parameters.size());
  for (int m = 0; m < micro_batches; ++m) {
    std::vector<torch::Tensor> sum(parameters.size());
    for (int r = 0; r < ranks; ++r) {
      for (auto& p : parameters) p.mutable_grad().reset();
      loss_of(reference->forward(input_of(r, m, step))).backward();
      for (size_t i = 0; i < parameters.size(); ++i) {
        sum[i] = r == 0 ? parameters[i].grad().clone() : sum[i] + parameters[i].grad();
      }
    }
    for (size_t i = 0; i < parameters.size(); ++i) {
      const torch::Tensor average = sum[i] / static_cast<double>(ranks);
      total[i] = m == 0 ? average : total[i] + average;
    }
  }
  return total;
}

struct Case {
  int ranks, prefetch;
  bool regather;
  int micro_batches;
};

void expect_close(const torch::Tensor& value, const torch::Tensor& expected, bool exact, const std::string& what) {
  if (exact) {
    EXPECT_TRUE(torch::equal(value, expected)) << what;
  } else {
    const double bound = 2 * giant::test::gamma(5 * 2, giant::test::unit_roundoff(Precision::fp32));
    EXPECT_TRUE(torch::allclose(value, expected, bound, bound * expected.abs().max().item<double>())) << what;
  }
}

void train_and_compare(const Case& c) {
  SCOPED_TRACE("ranks " + std::to_string(c.ranks) + " prefetch " + std::to_string(c.prefetch) + " regather " +
               std::to_string(c.regather) + " micro-batches " + std::to_string(c.micro_batches));
  run_ranks(c.ranks, [&](ccl::Communicator& comm) {
    const bool exact = comm.size() <= 2;
    LayerStack reference = make_stack();
    std::vector<LayerStack> chunks{make_stack()};
    auto parameters = parameters_of(chunks[0]);
    double waited = 0;
    ShardedParametersOptions options;
    options.prefetch_layers = c.prefetch;
    options.regather_each_micro_batch = c.regather;
    ShardedParameters sharded(chunks, parameters, comm, options, &waited);
    EXPECT_EQ(sharded.zero_stage(), 3);
    EXPECT_EQ(sharded.num_buckets(), kLinears.size());
    EXPECT_THROW(sharded.grad_view(0), Error);
    const std::vector<UpdatePiece> pieces = sharded.update_pieces();
    int64_t owned_bytes = 0, blocks_bytes = 0;  // the stretches; the blocks with their padding
    for (const UpdatePiece& piece : pieces) owned_bytes += piece.tensor.numel() * 4;
    for (const auto& [in, out] : kLinears) blocks_bytes += (in * out + out + comm.size() - 1) / comm.size() * 4;
    auto reference_parameters = parameters_of(reference);
    for (int step = 0; step < 2; ++step) {
      sharded.zero_grad();
      for (int m = 0; m < c.micro_batches; ++m) {
        const torch::Tensor loss = loss_of(chunks[0]->forward(input_of(comm.rank(), m, step)));
        if (!c.regather) {  // every unit stays gathered until its last backward of the step
          EXPECT_GE(sharded.held_bytes().now.parameters, owned_bytes + 4 * (7 * 5 + 7 + 3 * 7 + 3));
        }
        sharded.begin_micro_batch(m + 1 == c.micro_batches);
        loss.backward();
      }
      sharded.finish();
      EXPECT_EQ(sharded.held_bytes().now.parameters, blocks_bytes);  // the owned blocks only
      const auto expected = reference_gradients(reference, comm.size(), c.micro_batches, step);
      // The stretch of a whole tensor of parameter k's shape that piece k updates.
      auto stretch = [&](const torch::Tensor& whole, const UpdatePiece& piece) {
        return whole.detach().reshape({-1}).narrow(0, piece.offset, piece.tensor.numel());
      };
      for (size_t k = 0; k < pieces.size(); ++k) {
        expect_close(pieces[k].tensor.grad(), stretch(expected[pieces[k].parameter], pieces[k]), exact,
                     "gradient stretch " + std::to_string(k) + " step " + std::to_string(step) + " rank " +
                         std::to_string(comm.rank()));
      }
      // The update (plain SGD) on the owned stretches and on the reference.
      torch::NoGradGuard no_grad;
      for (const UpdatePiece& piece : pieces) piece.tensor.sub_(piece.tensor.grad() * 0.1);
      for (size_t i = 0; i < reference_parameters.size(); ++i) reference_parameters[i].sub_(expected[i] * 0.1);
      for (size_t k = 0; k < pieces.size(); ++k) {
        expect_close(pieces[k].tensor, stretch(reference_parameters[pieces[k].parameter], pieces[k]), exact,
                     "owned stretch " + std::to_string(k));
      }
    }
    // An evaluation forward gathers the update and frees each layer after it.
    {
      torch::NoGradGuard no_grad;
      sharded.reset_peaks();
      const torch::Tensor output = chunks[0]->forward(input_of(comm.rank(), 0, 7));
      expect_close(output, reference->forward(input_of(comm.rank(), 0, 7)), exact, "evaluation output");
      const HeldBytesReport held = sharded.held_bytes();
      EXPECT_LT(held.now.parameters, held.peak.parameters);
      // At most the running layer and the prefetched ones are whole at once.
      int64_t largest = 0;
      for (const auto& [in, out] : kLinears) largest = std::max(largest, in * out + out);
      const int64_t padded = (largest + comm.size() - 1) / comm.size() * comm.size();
      EXPECT_LE(held.peak.parameters, held.now.parameters + (1 + c.prefetch) * 4 * padded);
    }
    // Whole parameters on request (generation), then freed again.
    sharded.gather_all();
    for (size_t i = 0; i < parameters.size(); ++i) {
      expect_close(parameters[i].detach(), reference_parameters[i].detach(), exact, "gathered parameter");
    }
    sharded.release_all();
    EXPECT_EQ(sharded.held_bytes().now.parameters, blocks_bytes);
    EXPECT_EQ(sharded.held_bytes().now.gradients, blocks_bytes);  // fp32 gradient shards, as large
    EXPECT_EQ(sharded.held_bytes().now.comm_buffers, 0);
  });
}

TEST(ShardedParameters, MatchesTheUnshardedReferenceOnEveryWorldSize) {
  torch::set_num_threads(1);
  for (int ranks : {1, 2, 3, 4, 5}) train_and_compare({ranks, 1, true, 1});
}

TEST(ShardedParameters, PrefetchRegatherAndMicroBatchesAtDp2) {
  torch::set_num_threads(1);
  for (int prefetch : {0, 1, 2}) {
    for (bool regather : {true, false}) {
      for (int micro_batches : {1, 3}) train_and_compare({2, prefetch, regather, micro_batches});
    }
  }
}

TEST(ShardedParameters, ParametersKeepBeingTheModulesLeafTensors) {
  run_ranks(2, [](ccl::Communicator& comm) {
    std::vector<LayerStack> chunks{make_stack()};
    auto parameters = parameters_of(chunks[0]);
    std::vector<torch::TensorImpl*> impls;
    for (const auto& p : parameters) impls.push_back(p.unsafeGetTensorImpl());
    ShardedParameters sharded(chunks, parameters, comm, {}, nullptr);
    const auto after = parameters_of(chunks[0]);
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_EQ(after[i].unsafeGetTensorImpl(), impls[i]);
      EXPECT_TRUE(after[i].is_leaf() && after[i].requires_grad());
    }
    // Each element is owned by exactly one rank: half of the padded total here.
    int64_t mine = 0;
    for (const UpdatePiece& piece : sharded.update_pieces()) mine += piece.tensor.numel();
    int64_t total = 0;
    for (const auto& p : parameters) total += p.numel();
    EXPECT_LE(mine, (total + 2 * kLinears.size()) / 2 + 1);
  });
}

TEST(ShardedParameters, ParametersOutOfLayerOrderAreRefused) {
  run_ranks(1, [](ccl::Communicator& comm) {
    std::vector<LayerStack> chunks{make_stack()};
    auto parameters = parameters_of(chunks[0]);
    std::swap(parameters[0], parameters[1]);
    EXPECT_THROW(ShardedParameters(chunks, parameters, comm, {}, nullptr), Error);
  });
}

}  // namespace
}  // namespace giant::parallel
