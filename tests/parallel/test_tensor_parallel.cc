// Tensor collectives with autograd and the tensor-parallel layers, forward
// and backward, against the plain single-process computation. Ranks are
// threads over one MemoryStore; world sizes 1 to 4 where the shapes split.
//
// Tolerance: per-tensor relative norm ||a - b|| / ||b|| (support/
// tensor_error.h) within a worst-case rounding bound (support/rounding.h):
// a layer split over ranks sums each reduction in another order, and every
// reduction here is at most kLongestReduction terms, plus at most 4 ranks'
// parts. Two orders of a sum of n terms differ by at most 2 gamma_n relative
// to the terms' magnitudes; the inputs are drawn with random signs, whose
// sums are about 1 / sqrt(n) of those magnitudes (these tensors are too
// small for the norm-wise average of rounding errors to help). The
// collectives' own tests measure the cancellation on their inputs. Integer
// results and pure data movement are compared exactly.
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
#include "support/rounding.h"
#include "support/tensor_error.h"

namespace giant::parallel {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kLongestReduction = 36;  // the column case's 36 outputs, in its input gradient
constexpr int kMostRanks = 4;
const double kTolerance = 2 * giant::test::gamma(kLongestReduction + kMostRanks, giant::test::unit_roundoff(Precision::fp32)) *
                          std::sqrt(static_cast<double>(kLongestReduction));
constexpr uint64_t kSeed = 1234;
constexpr int64_t kLayerIndex = 3;
const std::vector<int> kWorldSizes{1, 2, 3, 4};

// One intra-op thread: the ranks are the parallelism here.
class OneTorchThread : public ::testing::Environment {
 public:
  void SetUp() override { torch::set_num_threads(1); }
};
const auto* const kOneTorchThread = ::testing::AddGlobalTestEnvironment(new OneTorchThread);

using test::run_ranks;

using giant::test::relative_error;

// Two orders of the sum of `size` tensors differ by at most 2 gamma_size (in
// the dtype's unit roundoff) of the sum of their magnitudes: relative to the
// sum itself, times how much the terms cancel.
double sum_bound(const std::vector<torch::Tensor>& terms, double u) {
  torch::Tensor sum = torch::zeros_like(terms[0], torch::kDouble), magnitude = sum.clone();
  for (const auto& t : terms) {
    sum += t.to(torch::kDouble);
    magnitude += t.to(torch::kDouble).abs();
  }
  const double cancellation = magnitude.norm().item<double>() / sum.norm().item<double>();
  return 2 * giant::test::gamma(static_cast<int64_t>(terms.size()), u) * cancellation;
}

// Shapes equal and ||a - b|| / ||b|| within the tolerance.
void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what,
                  double tolerance = kTolerance) {
  ASSERT_TRUE(a.defined()) << what << ": undefined";
  ASSERT_TRUE(b.defined()) << what << ": reference undefined";
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec()) << what;
  EXPECT_LE(relative_error(a, b), tolerance) << what;
}

void expect_equal(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what << ": undefined";
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec()) << what;
  ASSERT_EQ(a.scalar_type(), b.scalar_type()) << what;
  EXPECT_TRUE(torch::equal(a, b)) << what << "\n got " << a << "\n want " << b;
}

std::string at_size(const std::string& what, int rank, int size) {
  return what + " (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
}

// Deterministic per-(tag, rank) data, drawn on the calling thread before the
// ranks start (the global generator is not shared with the rank threads).
torch::Tensor draw(at::IntArrayRef shape, int64_t tag, torch::Dtype dtype = torch::kFloat) {
  torch::manual_seed(1000 + tag);
  return torch::randn(shape, torch::TensorOptions().dtype(torch::kDouble)).to(dtype);
}
std::vector<torch::Tensor> draw_per_rank(at::IntArrayRef shape, int size, int64_t tag,
                                         torch::Dtype dtype = torch::kFloat) {
  std::vector<torch::Tensor> out;
  for (int r = 0; r < size; ++r) out.push_back(draw(shape, tag * 16 + r, dtype));
  return out;
}

// ---------------------------------------------------------------- collectives

TEST(TensorCollectives, CclDtypeMapsTorchTypesAndRefusesOthers) {
  EXPECT_EQ(ccl_dtype(torch::kFloat), ccl::DType::f32);
  EXPECT_EQ(ccl_dtype(torch::kDouble), ccl::DType::f64);
  EXPECT_EQ(ccl_dtype(torch::kHalf), ccl::DType::f16);
  EXPECT_EQ(ccl_dtype(torch::kBFloat16), ccl::DType::bf16);
  EXPECT_EQ(ccl_dtype(torch::kInt), ccl::DType::i32);
  EXPECT_EQ(ccl_dtype(torch::kLong), ccl::DType::i64);
  EXPECT_EQ(ccl_dtype(torch::kByte), ccl::DType::u8);
  EXPECT_THROW(ccl_dtype(torch::kBool), Error);
  EXPECT_THROW(ccl_dtype(torch::kComplexFloat), Error);
}

TEST(TensorCollectives, LocalSliceIsTheRanksEvenPart) {
  const auto x = torch::arange(24).reshape({4, 6});
  expect_equal(local_slice(x, 1, 3, 1), x.narrow(1, 2, 2), "dim 1");
  expect_equal(local_slice(x, 3, 4, 0), x.narrow(0, 3, 1), "dim 0");
  expect_equal(local_slice(x, 2, 3, -1), x.narrow(1, 4, 2), "dim -1");
  EXPECT_THROW(local_slice(x, 0, 3, 0), Error);
}

// allreduce_ (sum, avg, max) against the sum computed here: f32 and f64 with
// random values, i64 with exact integers; counts 0, 1, odd and large (the
// large one takes the ring path); a non-contiguous tensor is staged and
// written back.
TEST(TensorCollectives, AllreduceMatchesThePlainReduction) {
  const std::vector<int64_t> counts{0, 1, 7, 100003};
  for (int size : kWorldSizes) {
    for (torch::Dtype dtype : {torch::kFloat, torch::kDouble, torch::kLong}) {
      std::vector<std::vector<torch::Tensor>> inputs;  // [count][rank]
      for (size_t c = 0; c < counts.size(); ++c) {
        auto per_rank = draw_per_rank({counts[c]}, size, static_cast<int64_t>(c), torch::kDouble);
        for (auto& t : per_rank) t = dtype == torch::kLong ? (t * 1000).round().to(dtype) : t.to(dtype);
        inputs.push_back(per_rank);
      }
      const auto staged = draw_per_rank({5, 3}, size, 9, torch::kDouble);
      const double u =
          dtype == torch::kFloat ? giant::test::unit_roundoff(Precision::fp32) : giant::test::kDoubleUnitRoundoff;
      run_ranks(size, [&](ccl::Communicator& comm) {
        const int rank = comm.rank();
        for (size_t c = 0; c < counts.size(); ++c) {
          auto sum = torch::zeros_like(inputs[c][0]);
          auto max = inputs[c][0].clone();
          for (const auto& t : inputs[c]) {
            sum += t;
            max = torch::maximum(max, t);
          }
          const std::string what =
              at_size(std::string("count ") + std::to_string(counts[c]) + " " + c10::toString(dtype), rank, size);
          auto x = inputs[c][rank].clone();
          allreduce_(x, comm);
          if (dtype == torch::kLong) {
            expect_equal(x, sum, what + " sum");
          } else if (counts[c] > 0) {
            expect_close(x, sum, what + " sum", sum_bound(inputs[c], u));
          }
          x = inputs[c][rank].clone();
          allreduce_(x, comm, ccl::ReduceOp::max);
          expect_equal(x, max, what + " max");
          if (dtype != torch::kLong) {
            x = inputs[c][rank].clone();
            allreduce_(x, comm, ccl::ReduceOp::avg);
            // The average: the sum's bound and one rounding more for the division.
            if (counts[c] > 0) expect_close(x, sum / size, what + " avg", sum_bound(inputs[c], u) + 2 * u);
          }
        }
        // Non-contiguous (a transpose): staged through a copy and written back.
        auto base = staged[rank].to(dtype == torch::kLong ? torch::kDouble : dtype);
        auto x = base.clone().t();
        ASSERT_FALSE(x.is_contiguous());
        auto expected = torch::zeros_like(base);
        for (const auto& t : staged) expected += t.to(base.scalar_type());
        allreduce_(x, comm);
        std::vector<torch::Tensor> terms;
        for (const auto& t : staged) terms.push_back(t.to(base.scalar_type()));
        expect_close(x, expected.t(), at_size("non-contiguous sum", rank, size), sum_bound(terms, u));
      });
    }
  }
}

// allgather concatenates the ranks' tensors along dim, contiguous or not.
TEST(TensorCollectives, AllgatherConcatenatesAlongDim) {
  for (int size : kWorldSizes) {
    const auto inputs = draw_per_rank({2, 3, 4}, size, 20);
    run_ranks(size, [&](ccl::Communicator& comm) {
      const int rank = comm.rank();
      for (int64_t dim : {0, 1, 2, -1}) {
        std::vector<torch::Tensor> parts(inputs.begin(), inputs.end());
        expect_equal(allgather(inputs[rank], comm, dim), torch::cat(parts, dim),
                     at_size("contiguous, dim " + std::to_string(dim), rank, size));
        // Non-contiguous: a permuted view, and a strided slice.
        std::vector<torch::Tensor> permuted, strided;
        for (const auto& t : inputs) {
          permuted.push_back(t.permute({2, 0, 1}));
          strided.push_back(t.slice(2, 0, 4, 2));
        }
        ASSERT_FALSE(permuted[rank].is_contiguous());
        ASSERT_FALSE(strided[rank].is_contiguous());
        expect_equal(allgather(permuted[rank], comm, dim), torch::cat(permuted, dim),
                     at_size("permuted, dim " + std::to_string(dim), rank, size));
        expect_equal(allgather(strided[rank], comm, dim), torch::cat(strided, dim),
                     at_size("strided, dim " + std::to_string(dim), rank, size));
      }
      // Integers too.
      auto ints = (inputs[rank] * 100).round().to(torch::kLong);
      std::vector<torch::Tensor> all_ints;
      for (const auto& t : inputs) all_ints.push_back((t * 100).round().to(torch::kLong));
      expect_equal(allgather(ints, comm, 1), torch::cat(all_ints, 1), at_size("i64", rank, size));
    });
  }
}

// copy_to_region: identity forward; backward, the upstream gradients of all
// ranks summed.
TEST(TensorCollectives, CopyToRegionIsIdentityForwardAndSumsGradients) {
  for (int size : kWorldSizes) {
    const auto x_full = draw({3, 4, 5}, 30);
    const auto upstream = draw_per_rank({3, 4, 5}, size, 31);
    run_ranks(size, [&](ccl::Communicator& comm) {
      const int rank = comm.rank();
      auto x = x_full.clone().requires_grad_();
      double seconds = 0;
      auto y = copy_to_region(x, comm, &seconds);
      expect_equal(y, x_full, at_size("forward", rank, size));
      (y * upstream[rank]).sum().backward();
      auto expected = torch::zeros_like(x_full);
      for (const auto& g : upstream) expected += g;
      expect_close(x.grad(), expected, at_size("gradient", rank, size));
      if (size > 1) {
        EXPECT_GT(seconds, 0.0) << "the backward allreduce is timed";
      }
    });
  }
}

// reduce_from_region: the sum over ranks forward; identity backward (each
// rank's own upstream gradient, not the sum).
TEST(TensorCollectives, ReduceFromRegionSumsForwardAndPassesGradients) {
  for (int size : kWorldSizes) {
    const auto inputs = draw_per_rank({4, 6}, size, 40);
    const auto upstream = draw_per_rank({4, 6}, size, 41);
    run_ranks(size, [&](ccl::Communicator& comm) {
      const int rank = comm.rank();
      auto x = inputs[rank].clone().requires_grad_();
      auto y = reduce_from_region(x, comm);
      auto expected = torch::zeros_like(inputs[0]);
      for (const auto& t : inputs) expected += t;
      expect_close(y, expected, at_size("forward", rank, size));
      EXPECT_TRUE(torch::equal(x.detach(), inputs[rank])) << "the input is not modified";
      (y * upstream[rank]).sum().backward();
      expect_equal(x.grad(), upstream[rank], at_size("gradient", rank, size));
    });
  }
}

// scatter_to_region: this rank's slice forward; backward, the ranks'
// gradients gathered. gather_from_region: the concatenation forward; this
// rank's slice of the (replicated) upstream gradient backward.
TEST(TensorCollectives, ScatterAndGatherAlongFirstAndLastDim) {
  for (int size : kWorldSizes) {
    const auto full = draw({12, 5, 12}, 50);
    const auto scatter_upstream_full = draw({12, 5, 12}, 51);  // sliced per rank below
    const auto parts = draw_per_rank({2, 5, 3}, size, 52);
    for (int64_t dim : {0, -1, 2}) {
      std::vector<torch::Tensor> part_list(parts.begin(), parts.end());
      const auto gathered = torch::cat(part_list, dim);
      const auto gather_upstream = draw(gathered.sizes(), 53);
      run_ranks(size, [&](ccl::Communicator& comm) {
        const int rank = comm.rank();
        const std::string d = " dim " + std::to_string(dim);
        // scatter
        auto x = full.clone().requires_grad_();
        auto y = scatter_to_region(x, comm, dim);
        expect_equal(y, local_slice(full, rank, size, dim), at_size("scatter forward" + d, rank, size));
        // Each rank's upstream gradient is its slice of one tensor, so the
        // gathered gradient is that tensor.
        (y * local_slice(scatter_upstream_full, rank, size, dim)).sum().backward();
        expect_equal(x.grad(), scatter_upstream_full, at_size("scatter gradient" + d, rank, size));
        // gather
        auto p = parts[rank].clone().requires_grad_();
        auto z = gather_from_region(p, comm, dim);
        expect_equal(z, gathered, at_size("gather forward" + d, rank, size));
        (z * gather_upstream).sum().backward();
        expect_equal(p.grad(), local_slice(gather_upstream, rank, size, dim).contiguous(),
                     at_size("gather gradient" + d, rank, size));
      });
    }
  }
}

// World size 1 passes every region through without an autograd node.
TEST(TensorCollectives, WorldSizeOnePassesThroughWithoutAutogradNodes) {
  run_ranks(1, [&](ccl::Communicator& comm) {
    auto leaf = torch::randn({4, 4}, torch::requires_grad());
    auto x = leaf * 2;  // a non-leaf, so it has a grad_fn
    ASSERT_TRUE(x.grad_fn());
    const std::vector<std::pair<std::string, torch::Tensor>> outputs{
        {"copy_to_region", copy_to_region(x, comm)},
        {"reduce_from_region", reduce_from_region(x, comm)},
        {"scatter_to_region", scatter_to_region(x, comm, 0)},
        {"gather_from_region", gather_from_region(x, comm, -1)},
    };
    for (const auto& [name, y] : outputs) {
      EXPECT_EQ(y.grad_fn().get(), x.grad_fn().get()) << name;
      EXPECT_TRUE(y.is_same(x)) << name;
    }
    auto y = x.detach().clone();
    allreduce_(y, comm);
    expect_equal(y, x.detach(), "allreduce_ of one rank");
    allreduce_(y, comm, ccl::ReduceOp::avg);
    expect_equal(y, x.detach(), "avg of one rank");
    expect_equal(allgather(x.detach(), comm, 1), x.detach(), "allgather of one rank");
  });
}

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
