// Tensor collectives with autograd, forward and backward, against the plain
// single-process computation. Ranks are threads over one MemoryStore; world
// sizes 1 to 4 where the shapes split. Tolerances: support/tensor_checks.h.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/ccl/communicator.h"
#include "giant/parallel/tensor_collectives.h"
#include "parallel/support/rank_threads.h"
#include "parallel/support/tensor_checks.h"

namespace giant::parallel {
namespace {

using namespace test;  // the shared checks (support/tensor_checks.h) and run_ranks

// One intra-op thread: the ranks are the parallelism here.
class OneTorchThread : public ::testing::Environment {
 public:
  void SetUp() override { torch::set_num_threads(1); }
};
const auto* const kOneTorchThread = ::testing::AddGlobalTestEnvironment(new OneTorchThread);

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

}  // namespace
}  // namespace giant::parallel
