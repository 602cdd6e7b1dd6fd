// The tensor-parallel layers, forward and backward, against the plain
// single-process computation (the collectives under them:
// test_tensor_collectives.cc). Ranks are threads over one MemoryStore; world
// sizes 1 to 4 where the shapes split. Tolerances: support/tensor_checks.h.
#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/parallel/layer_list.h"
#include "giant/parallel/tensor_collectives.h"
#include "giant/parallel/tensor_parallel/layers.h"
#include "parallel/support/rank_threads.h"
#include "parallel/support/tensor_checks.h"

namespace giant::parallel {
namespace {

using namespace std::chrono_literals;
using namespace test;  // the shared checks (support/tensor_checks.h) and run_ranks

// One intra-op thread: the ranks are the parallelism here.
class OneTorchThread : public ::testing::Environment {
 public:
  void SetUp() override { torch::set_num_threads(1); }
};
const auto* const kOneTorchThread = ::testing::AddGlobalTestEnvironment(new OneTorchThread);

// -------------------------------------------------------------------- layers

torch::TensorOptions f32() { return torch::TensorOptions().dtype(torch::kFloat); }

// Gradients of a module's parameters by name.
std::map<std::string, torch::Tensor> parameter_grads(const torch::nn::Module& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().grad();
  return out;
}
std::map<std::string, torch::Tensor> parameter_values(const torch::nn::Module& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : m.named_parameters()) out[p.key()] = p.value().detach();
  return out;
}

// Gives a zero-initialised bias random values, so that the forward checks
// which slice of it each rank adds; `slice` cuts the whole bias for a rank.
void set_bias(torch::nn::Module& m, const std::string& name, const torch::Tensor& full_bias,
              const std::function<torch::Tensor(const torch::Tensor&)>& slice) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.named_parameters()) {
    if (p.key() == name) p.value().copy_(slice(full_bias));
  }
}

struct ColumnCase {
  int64_t in, out, stacked;
  bool gather_output;
};

TEST(TensorParallelLayers, ColumnParallelLinearMatchesTheUnsplitLayer) {
  // stacked = 3 as the fused qkv uses it: output split, each rank's q, k
  // and v parts side by side.
  const std::vector<ColumnCase> cases{{5, 12, 1, false}, {5, 12, 1, true}, {8, 36, 3, false}};
  for (const auto& cc : cases) {
    SharedWeights shared;
    LayerContext whole_context(kSeed, kLayerIndex, "block_3", f32(), shared);
    ColumnParallelLinear whole(whole_context, "qkv", cc.in, cc.out, 0.5, cc.gather_output, cc.stacked);
    const auto full_bias = draw({cc.out}, 70);
    set_bias(*whole, "tp_bias", full_bias, [](const torch::Tensor& b) { return b; });
    const auto x_full = draw({2, 3, cc.in}, 71);
    const auto upstream = draw({2, 3, cc.out}, 72);
    auto x = x_full.clone().requires_grad_();
    auto y_full = whole(x);
    (y_full * upstream).sum().backward();
    const auto grads_full = parameter_grads(*whole);
    const auto values_full = parameter_values(*whole);
    const auto x_grad_full = x.grad();

    for (int size : kWorldSizes) {
      if ((cc.out / cc.stacked) % size != 0) continue;
      const std::string label = "in " + std::to_string(cc.in) + " out " + std::to_string(cc.out) + " stacked " +
                                std::to_string(cc.stacked) + (cc.gather_output ? " gathered" : " split");
      run_ranks(size, [&](ccl::Communicator& comm) {
        const int rank = comm.rank();
        auto rows = [&](const torch::Tensor& t) { return shard_rows(t, rank, size, cc.stacked); };
        SharedWeights rank_shared;
        LayerContext context(kSeed, kLayerIndex, "block_3", f32(), rank_shared,
                             TensorParallelGroup{&comm, rank, size});
        ColumnParallelLinear layer(context, "qkv", cc.in, cc.out, 0.5, cc.gather_output, cc.stacked);
        set_bias(*layer, "tp_bias", full_bias, rows);
        const auto values = parameter_values(*layer);
        ASSERT_EQ(values.size(), 2u);
        expect_equal(values.at("tp_weight"), rows(values_full.at("tp_weight")),
                     at_size(label + " weight shard", rank, size));

        auto xr = x_full.clone().requires_grad_();
        auto y = layer(xr);
        // Split, the rank's output features are its rows of the (stacked) weight.
        auto mine = [&](const torch::Tensor& t) {
          return cc.gather_output ? t : rows(t.reshape({-1, cc.out}).t()).t().reshape({2, 3, -1});
        };
        expect_close(y, mine(y_full.detach()), at_size(label + " output", rank, size));
        (y * mine(upstream)).sum().backward();
        expect_close(xr.grad(), x_grad_full, at_size(label + " input gradient", rank, size));
        const auto grads = parameter_grads(*layer);
        for (const auto& name : {"tp_weight", "tp_bias"}) {
          expect_close(grads.at(name), rows(grads_full.at(name)),
                       at_size(label + " " + name + " gradient", rank, size));
        }
      });
    }
  }
}

TEST(TensorParallelLayers, RowParallelLinearMatchesTheUnsplitLayer) {
  const int64_t in = 12, out = 7;
  SharedWeights shared;
  LayerContext whole_context(kSeed, kLayerIndex, "block_3", f32(), shared);
  RowParallelLinear whole(whole_context, "proj", in, out, 0.5);
  const auto full_bias = draw({out}, 80);
  set_bias(*whole, "bias", full_bias, [](const torch::Tensor& b) { return b; });
  const auto x_full = draw({2, 3, in}, 81);
  const auto upstream = draw({2, 3, out}, 82);
  auto x = x_full.clone().requires_grad_();
  auto y_full = whole(x);
  (y_full * upstream).sum().backward();
  const auto grads_full = parameter_grads(*whole);
  const auto values_full = parameter_values(*whole);

  for (int size : kWorldSizes) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      const int rank = comm.rank();
      SharedWeights rank_shared;
      LayerContext context(kSeed, kLayerIndex, "block_3", f32(), rank_shared,
                           TensorParallelGroup{&comm, rank, size});
      RowParallelLinear layer(context, "proj", in, out, 0.5);
      set_bias(*layer, "bias", full_bias, [](const torch::Tensor& b) { return b; });
      const auto values = parameter_values(*layer);
      ASSERT_EQ(values.size(), 2u);
      expect_equal(values.at("tp_weight"), shard_columns(values_full.at("tp_weight"), rank, size),
                   at_size("weight shard", rank, size));

      auto xr = local_slice(x_full, rank, size, -1).clone().requires_grad_();
      auto y = layer(xr);
      expect_close(y, y_full.detach(), at_size("output", rank, size));
      (y * upstream).sum().backward();
      expect_close(xr.grad(), local_slice(x.grad(), rank, size, -1), at_size("input gradient", rank, size));
      const auto grads = parameter_grads(*layer);
      expect_close(grads.at("tp_weight"), shard_columns(grads_full.at("tp_weight"), rank, size),
                   at_size("weight gradient", rank, size));
      expect_close(grads.at("bias"), grads_full.at("bias"), at_size("bias gradient (replicated)", rank, size));
    });
  }
}

// Column- then row-parallel, as an MLP uses them: one allreduce forward and
// one backward, the result the unsplit pair's.
TEST(TensorParallelLayers, ColumnThenRowMatchesTheUnsplitPair) {
  const int64_t h = 6, f = 12;
  SharedWeights shared;
  LayerContext whole_context(kSeed, kLayerIndex, "block_3", f32(), shared);
  ColumnParallelLinear fc1(whole_context, "fc1", h, f, 0.5);
  RowParallelLinear fc2(whole_context, "fc2", f, h, 0.5);
  const auto x_full = draw({4, h}, 90);
  const auto upstream = draw({4, h}, 91);
  auto x = x_full.clone().requires_grad_();
  auto y_full = fc2(torch::gelu(fc1(x)));
  (y_full * upstream).sum().backward();
  const auto fc1_grads = parameter_grads(*fc1);
  const auto fc2_grads = parameter_grads(*fc2);
  for (int size : kWorldSizes) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      const int rank = comm.rank();
      SharedWeights rank_shared;
      LayerContext context(kSeed, kLayerIndex, "block_3", f32(), rank_shared,
                           TensorParallelGroup{&comm, rank, size});
      ColumnParallelLinear a(context, "fc1", h, f, 0.5);
      RowParallelLinear b(context, "fc2", f, h, 0.5);
      auto xr = x_full.clone().requires_grad_();
      auto y = b(torch::gelu(a(xr)));
      expect_close(y, y_full.detach(), at_size("output", rank, size));
      (y * upstream).sum().backward();
      expect_close(xr.grad(), x.grad(), at_size("input gradient", rank, size));
      const auto ga = parameter_grads(*a), gb = parameter_grads(*b);
      expect_close(ga.at("tp_weight"), shard_rows(fc1_grads.at("tp_weight"), rank, size),
                   at_size("fc1 weight", rank, size));
      expect_close(ga.at("tp_bias"), shard_rows(fc1_grads.at("tp_bias"), rank, size),
                   at_size("fc1 bias", rank, size));
      expect_close(gb.at("tp_weight"), shard_columns(fc2_grads.at("tp_weight"), rank, size),
                   at_size("fc2 weight", rank, size));
      expect_close(gb.at("bias"), fc2_grads.at("bias"), at_size("fc2 bias", rank, size));
    });
  }
}

TEST(TensorParallelLayers, VocabParallelEmbeddingMatchesTheWholeTable) {
  const int64_t vocab = 12, hidden = 5;
  SharedWeights shared;
  LayerContext whole_context(kSeed, 0, "embedding", f32(), shared);
  VocabParallelEmbedding whole(whole_context, "wte", vocab, hidden, 0.5, "wte");
  const auto table = parameter_values(*whole).at("tp_weight");
  EXPECT_TRUE(shared.contains("wte"));
  // Every id (so every shard's first and last row) and repeats, in a [3, 7]
  // batch.
  const auto tokens =
      torch::tensor({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 11, 5, 6, 2, 3, 3, 8, 9}, torch::kLong)
          .reshape({3, 7});
  const auto upstream = draw({3, 7, hidden}, 100);
  auto y_full = whole(tokens);
  expect_equal(y_full.detach(), torch::embedding(table, tokens), "size 1 is the plain lookup");
  (y_full * upstream).sum().backward();
  const auto grad_full = parameter_grads(*whole).at("tp_weight");
  // The plain lookup's gradient, for the record.
  auto reference_table = table.clone().requires_grad_();
  (torch::embedding(reference_table, tokens) * upstream).sum().backward();
  expect_close(grad_full, reference_table.grad(), "size 1 gradient");

  for (int size : kWorldSizes) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      const int rank = comm.rank();
      SharedWeights rank_shared;
      LayerContext context(kSeed, 0, "embedding", f32(), rank_shared, TensorParallelGroup{&comm, rank, size});
      VocabParallelEmbedding layer(context, "wte", vocab, hidden, 0.5, "wte");
      const auto shard = parameter_values(*layer).at("tp_weight");
      expect_equal(shard, shard_rows(table, rank, size), at_size("weight shard", rank, size));
      ASSERT_TRUE(rank_shared.contains("wte"));
      EXPECT_EQ(rank_shared.get("wte").data_ptr(), shard.data_ptr()) << "publishes its own shard";
      auto y = layer(tokens);
      expect_close(y, torch::embedding(table, tokens), at_size("output", rank, size));
      (y * upstream).sum().backward();
      expect_close(parameter_grads(*layer).at("tp_weight"), shard_rows(reference_table.grad(), rank, size),
                   at_size("weight gradient", rank, size));
    });
  }
}

// Layers refuse shapes that do not split, before any communication.
TEST(TensorParallelLayers, RefuseShapesThatDoNotSplit) {
  SharedWeights shared;
  LayerContext three(kSeed, kLayerIndex, "block_3", f32(), shared, TensorParallelGroup{nullptr, 0, 3});
  EXPECT_THROW(ColumnParallelLinear(three, "fc1", 4, 8, 0.5), Error);
  EXPECT_THROW(ColumnParallelLinear(three, "qkv", 4, 3 * 8, 0.5, false, 3), Error);  // 8 per block
  EXPECT_THROW(RowParallelLinear(three, "fc2", 8, 4, 0.5), Error);
  EXPECT_THROW(VocabParallelEmbedding(three, "wte", 16, 4, 0.5, ""), Error);
  // Gathering a stacked output would interleave the ranks' q|k|v parts
  // instead of giving the unsplit column order: refused at any tp size.
  EXPECT_THROW(ColumnParallelLinear(three, "qkv", 4, 36, 0.5, /*gather_output=*/true, 3), Error);
  LayerContext one(kSeed, kLayerIndex, "block_3", f32(), shared);
  EXPECT_THROW(ColumnParallelLinear(one, "qkv", 4, 36, 0.5, /*gather_output=*/true, 3), Error);
  EXPECT_THROW(ColumnParallelLinear(one, "qkv", 4, 10, 0.5, false, 3), Error);  // 10 rows in 3 blocks
}

// ------------------------------------------------------------ cross entropy

// The loss on logits split along the vocabulary, each rank holding only its
// shard, against cross entropy on the whole logits. The last shard's padding
// columns are -inf (targets never point there); with 4 ranks the last shard
// is padding only.
TEST(TensorParallelLayers, VocabParallelCrossEntropyMatchesTheWholeLogits) {
  const int64_t real_vocab = 9, padded_vocab = 16;
  auto logits_full = draw({2, 5, padded_vocab}, 110) * 3;
  logits_full.narrow(-1, real_vocab, padded_vocab - real_vocab).fill_(-std::numeric_limits<float>::infinity());
  // Targets at every real id, the edges of each shard among them.
  const auto targets = torch::tensor({0, 3, 4, 7, 8, 1, 2, 5, 6, 8}, torch::kLong).reshape({2, 5});
  auto reference_logits = logits_full.clone().requires_grad_();
  auto reference_loss =
      torch::cross_entropy_loss(reference_logits.reshape({-1, padded_vocab}), targets.reshape({-1}));
  reference_loss.backward();
  ASSERT_TRUE(std::isfinite(reference_loss.item<double>()));
  const auto reference_grad = reference_logits.grad();
  ASSERT_TRUE(torch::isfinite(reference_grad).all().item<bool>());

  for (int size : {1, 2, 4}) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      const int rank = comm.rank();
      double seconds = 0;
      TensorParallelGroup tp{&comm, rank, size, &seconds};
      // Only this rank's columns exist here.
      auto shard = local_slice(logits_full, rank, size, -1).clone().requires_grad_();
      auto loss = vocab_parallel_cross_entropy(shard, targets, tp);
      ASSERT_EQ(loss.dim(), 0);
      expect_close(loss, reference_loss.detach(), at_size("loss", rank, size));
      loss.backward();
      ASSERT_TRUE(torch::isfinite(shard.grad()).all().item<bool>()) << at_size("finite gradient", rank, size);
      expect_close(shard.grad(), local_slice(reference_grad, rank, size, -1),
                   at_size("logits gradient", rank, size));
      // Padding is never predicted: its gradient is exactly zero.
      const int64_t part = padded_vocab / size;
      for (int64_t col = 0; col < part; ++col) {
        if (rank * part + col >= real_vocab) {
          EXPECT_EQ(shard.grad().select(-1, col).abs().max().item<float>(), 0.0f)
              << at_size("padding column " + std::to_string(rank * part + col), rank, size);
        }
      }
      if (size > 1) {
        EXPECT_GT(seconds, 0.0) << "its reductions are timed";
      }
      // A scaled upstream gradient scales the logits' gradient.
      auto shard2 = local_slice(logits_full, rank, size, -1).clone().requires_grad_();
      (vocab_parallel_cross_entropy(shard2, targets, tp) * 2.5).backward();
      expect_close(shard2.grad(), local_slice(reference_grad, rank, size, -1) * 2.5,
                   at_size("scaled logits gradient", rank, size));
      // The communicator is still in step after the loss (same collectives
      // issued on every rank).
      auto probe = torch::ones({3});
      allreduce_(probe, comm);
      expect_equal(probe, torch::full({3}, static_cast<float>(size)), at_size("in step", rank, size));
    });
  }
}

// ------------------------------------------------------------- shard helpers

TEST(TensorParallelShards, NamesEndingInTpPrefixAreShards) {
  EXPECT_TRUE(is_tensor_parallel_shard("block_0.qkv.tp_weight"));
  EXPECT_FALSE(is_tensor_parallel_shard("block_0.proj.bias"));
  EXPECT_TRUE(is_tensor_parallel_shard("embedding.wte.tp_weight"));
  EXPECT_TRUE(is_tensor_parallel_shard("tp_x"));
  EXPECT_FALSE(is_tensor_parallel_shard("a.btp_x"));
  EXPECT_FALSE(is_tensor_parallel_shard("tp"));
  EXPECT_FALSE(is_tensor_parallel_shard("tp_block.weight"));
  EXPECT_FALSE(is_tensor_parallel_shard(""));
}

TEST(TensorParallelShards, StackedRowsCutEachBlockOnItsOwn) {
  const auto full = torch::arange(36 * 2).reshape({36, 2});
  for (int size : kWorldSizes) {
    for (int rank = 0; rank < size; ++rank) {
      std::vector<torch::Tensor> thirds;
      for (int64_t block = 0; block < 3; ++block) {
        thirds.push_back(local_slice(full.narrow(0, block * 12, 12), rank, size, 0));
      }
      expect_equal(shard_rows(full, rank, size, 3), torch::cat(thirds, 0), at_size("stacked 3", rank, size));
      expect_equal(shard_rows(full, rank, size), local_slice(full, rank, size, 0),
                   at_size("stacked 1", rank, size));
      expect_equal(shard_columns(full.t(), rank, size), local_slice(full.t(), rank, size, 1),
                   at_size("columns", rank, size));
      // A 1-d bias cuts the same way.
      const auto bias = torch::arange(36);
      std::vector<torch::Tensor> bias_thirds;
      for (int64_t block = 0; block < 3; ++block) {
        bias_thirds.push_back(local_slice(bias.narrow(0, block * 12, 12), rank, size, 0));
      }
      expect_equal(shard_rows(bias, rank, size, 3), torch::cat(bias_thirds, 0),
                   at_size("stacked bias", rank, size));
    }
  }
  EXPECT_THROW(shard_rows(full, 0, 5, 3), Error);
  EXPECT_THROW(shard_columns(full, 0, 3), Error);
}

}  // namespace
}  // namespace giant::parallel
