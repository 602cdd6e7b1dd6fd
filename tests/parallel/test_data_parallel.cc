// Data-parallel gradient reduction (GradientReducer) over world sizes 1 to 4,
// replicated and with the optimizer sharded (ZeRO stage 1), on exact inputs:
// small integers, so every sum is exact and the average is within one
// rounding, and the expected value computed here within another: gamma_2
// of fp32, element by element (support/rounding.h). Buckets are made small so a step spans several,
// and parameter sizes are odd so blocks cut through parameters and padding.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/parallel/data_parallel/gradient_reducer.h"
#include "giant/parallel/tensor_collectives.h"
#include "parallel/support/rank_threads.h"
#include "support/rounding.h"

namespace giant::parallel {
namespace {

using test::run_ranks;

// Odd sizes; the last two are large enough (over 32 KiB a bucket) for the
// in-place shared-memory paths.
const std::vector<std::vector<int64_t>> kShapes{{3, 5}, {7}, {2, 2, 3}, {1}, {4, 9}, {101, 97}, {9001}};
constexpr int64_t kBucketBytes = 64;  // a few small parameters per bucket

// Parameter i of rank r: element k is i * 100 + k; its gradient (r + 1) * (k % 5 + 1 + i).
std::vector<torch::Tensor> make_parameters() {
  std::vector<torch::Tensor> parameters;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const int64_t n = c10::multiply_integers(kShapes[i]);
    parameters.push_back((torch::arange(n, torch::kFloat) + 100.0 * i).reshape(kShapes[i]).requires_grad_(true));
  }
  return parameters;
}
torch::Tensor local_gradient(size_t i, int rank) {
  const int64_t n = c10::multiply_integers(kShapes[i]);
  return ((torch::arange(n, torch::kFloat).remainder(5) + 1 + static_cast<double>(i)) * (rank + 1)).reshape(kShapes[i]);
}
const double kTwoRoundings = giant::test::gamma(2, giant::test::unit_roundoff(Precision::fp32));

torch::Tensor average_gradient(size_t i, int size) {
  return local_gradient(i, 0) * ((size + 1) / 2.0);  // the mean of 1..size
}

TEST(GradientReducer, ReplicatedAveragesEveryGradient) {
  for (int size : {1, 2, 3, 4}) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      auto parameters = make_parameters();
      GradientReducer reducer(parameters, comm, kBucketBytes);
      EXPECT_GT(reducer.num_buckets(), 2u);
      EXPECT_FALSE(reducer.shards_optimizer());
      const std::vector<UpdatePiece> pieces = reducer.update_pieces();  // every parameter, whole
      ASSERT_EQ(pieces.size(), parameters.size());
      for (const UpdatePiece& piece : pieces) EXPECT_TRUE(piece.whole);
      std::vector<void*> views;
      for (const auto& p : parameters) views.push_back(p.grad().data_ptr());
      // Buckets are reused; gradients arrive as fresh tensors, as from
      // backward. In the second step parameter 2 gets none: it averages to
      // zero, whatever its bucket held before.
      for (int step = 0; step < 2; ++step) {
        reducer.zero_grad();
        for (const auto& p : parameters) EXPECT_FALSE(p.grad().defined());
        reducer.begin_micro_batch(true);
        for (size_t i = 0; i < parameters.size(); ++i) {
          if (step == 1 && i == 2) continue;
          parameters[i].mutable_grad() = local_gradient(i, comm.rank());
        }
        reducer.finish();
        for (size_t i = 0; i < parameters.size(); ++i) {
          EXPECT_EQ(parameters[i].grad().data_ptr(), views[i]) << "parameter " << i << " is not its bucket view";
          const torch::Tensor expected =
              step == 1 && i == 2 ? torch::zeros(kShapes[i]) : average_gradient(i, size);
          EXPECT_TRUE(torch::allclose(parameters[i].grad(), expected, kTwoRoundings, 0))
              << "parameter " << i << " rank " << comm.rank() << " of " << size << " step " << step;
        }
      }
    });
  }
}

// One backward whose gradients are (m + 1) x local_gradient, for `which`
// parameters only (a pipeline chunk's).
void backward(const std::vector<torch::Tensor>& parameters, const std::vector<size_t>& which, int rank, int m) {
  torch::Tensor loss = torch::zeros({});
  for (size_t i : which) loss = loss + (parameters[i] * local_gradient(i, rank) * (m + 1.0)).sum();
  loss.backward();
}

// Interleaved pipelines run a rank's chunks' backwards alternately: the
// later chunk's last backward (its buckets start) comes before the earlier
// chunk's last two; the earlier chunk's buckets start after its own.
TEST(GradientReducer, EachChunksLastBackwardStartsItsBuckets) {
  const std::vector<size_t> late{4, 5, 6}, early{0, 1, 2, 3};  // buckets in backward order: late's first
  for (int size : {1, 2, 3, 4}) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      auto parameters = make_parameters();
      GradientReducer reducer(parameters, comm, kBucketBytes);
      for (int step = 0; step < 2; ++step) {
        reducer.zero_grad();
        for (int m = 0; m < 2; ++m) {
          reducer.begin_micro_batch(m == 1);
          backward(parameters, late, comm.rank(), m);
          reducer.begin_micro_batch(m == 1);
          backward(parameters, early, comm.rank(), m);
        }
        reducer.finish();
        for (size_t i = 0; i < parameters.size(); ++i) {
          EXPECT_TRUE(torch::allclose(parameters[i].grad(), average_gradient(i, size) * 3.0, kTwoRoundings, 0))
              << "parameter " << i << " rank " << comm.rank() << " of " << size << " step " << step;
        }
      }
    });
  }
}

// GPipe runs backwards in reverse: flagging micro-batch M - 1 as the last
// would start the reductions while micro-batch 0 still adds to the buckets.
// The reducer refuses such a gradient instead of reducing a partial sum.
TEST(GradientReducer, GradientAfterTheFlaggedLastBackwardIsRefused) {
  const std::vector<size_t> all{0, 1, 2, 3, 4, 5, 6};
  for (int size : {1, 2}) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      auto parameters = make_parameters();
      GradientReducer reducer(parameters, comm, kBucketBytes);
      reducer.zero_grad();
      reducer.begin_micro_batch(true);
      backward(parameters, all, comm.rank(), 1);
      reducer.begin_micro_batch(false);
      try {
        backward(parameters, all, comm.rank(), 0);
        ADD_FAILURE() << "a gradient after its bucket's reduction started was accepted";
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("arrived after its bucket's reduction started"), std::string::npos)
            << e.what();
      }
      reducer.finish();  // the reductions started are waited for, not left in flight
    });
  }
}

// Over shared memory (reduce-scatter and gather in place on shared buffers)
// and over tcp (the ring algorithms, in place on plain memory).
class ShardedReducer : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Transports, ShardedReducer, ::testing::Values("auto", "tcp"));

TEST_P(ShardedReducer, OwnsEachElementOnceAndGathersTheUpdate) {
  const std::string transport = GetParam();
  for (int size : {1, 2, 3, 4}) {
    std::mutex mutex;
    std::map<int, std::vector<torch::Tensor>> gathered;  // by rank: the parameters after the update
    int64_t owned_total = 0;
    run_ranks(size, [&](ccl::Communicator& comm) {
      const int rank = comm.rank();
      auto parameters = make_parameters();
      std::vector<torch::Tensor> initial;
      for (const auto& p : parameters) initial.push_back(p.detach().clone());
      std::vector<const void*> storage;
      for (const auto& p : parameters) storage.push_back(p.data_ptr());
      GradientReducer reducer(parameters, comm, kBucketBytes, /*shard_optimizer=*/true);
      EXPECT_TRUE(reducer.shards_optimizer());
      // The data moved into the flat buffers, values kept, the same tensors.
      for (size_t i = 0; i < parameters.size(); ++i) {
        EXPECT_NE(parameters[i].data_ptr(), storage[i]) << "parameter " << i;
        EXPECT_TRUE(torch::equal(parameters[i].detach(), initial[i])) << "parameter " << i;
        EXPECT_TRUE(parameters[i].requires_grad());
      }
      reducer.zero_grad();
      reducer.begin_micro_batch(true);
      for (size_t i = 0; i < parameters.size(); ++i) parameters[i].mutable_grad() = local_gradient(i, rank);
      reducer.finish();
      // Each owned stretch carries the average of its elements' gradients.
      std::vector<at::Tensor> owned;
      std::vector<size_t> source;
      for (const UpdatePiece& piece : reducer.update_pieces()) {
        EXPECT_FALSE(piece.whole);
        owned.push_back(piece.tensor);
        source.push_back(piece.parameter);
      }
      int64_t mine = 0;
      for (size_t k = 0; k < owned.size(); ++k) {
        const size_t i = source[k];
        const auto offset = (static_cast<const char*>(owned[k].data_ptr()) -
                             static_cast<const char*>(parameters[i].data_ptr())) / static_cast<int64_t>(sizeof(float));
        const torch::Tensor expected = average_gradient(i, size).reshape({-1}).narrow(0, offset, owned[k].numel());
        EXPECT_TRUE(torch::allclose(owned[k].grad(), expected, kTwoRoundings, 0)) << "stretch " << k << " rank " << rank;
        mine += owned[k].numel();
        owned[k].fill_(-(rank + 1));  // the update: the owner's mark
      }
      reducer.gather_parameters();
      std::lock_guard<std::mutex> lock(mutex);
      owned_total += mine;
      for (const auto& p : parameters) gathered[rank].push_back(p.detach().clone());
    }, transport);
    // Every element is owned by exactly one rank, and every rank holds every owner's update.
    int64_t elements = 0;
    for (const auto& shape : kShapes) elements += c10::multiply_integers(shape);
    EXPECT_EQ(owned_total, elements) << "size " << size;
    ASSERT_EQ(gathered.size(), static_cast<size_t>(size));
    for (size_t i = 0; i < kShapes.size(); ++i) {
      EXPECT_TRUE((gathered[0][i] < 0).all().item<bool>()) << "parameter " << i << " not wholly updated, size " << size;
      for (int r = 1; r < size; ++r) {
        EXPECT_TRUE(torch::equal(gathered[r][i], gathered[0][i])) << "parameter " << i << " rank " << r;
      }
    }
  }
}

// The gather started behind the update: waiting through parameter i makes
// parameters 0..i whole in order; finish() of the next step waits for any
// still in flight before the next update may start.
TEST_P(ShardedReducer, GathersBehindTheNextForwardInParameterOrder) {
  const std::string transport = GetParam();
  for (int size : {1, 2, 3}) {
    run_ranks(size, [&](ccl::Communicator& comm) {
      auto parameters = make_parameters();
      GradientReducer reducer(parameters, comm, kBucketBytes, /*shard_optimizer=*/true);
      ASSERT_GT(reducer.num_buckets(), 2u);
      auto step = [&](float mark) {  // every owner writes its mark on its stretches
        reducer.zero_grad();
        reducer.begin_micro_batch(true);
        for (auto& p : parameters) p.mutable_grad() = torch::ones(p.sizes());
        reducer.finish();
        for (const UpdatePiece& piece : reducer.update_pieces()) piece.tensor.detach().fill_(mark - comm.rank());
        reducer.gather_parameters_async();
      };
      auto updated_by = [&](size_t i, float mark) {  // every element carries some owner's mark
        const torch::Tensor p = parameters[i].detach();
        return ((p <= mark) & (p > mark - size)).all().item<bool>();
      };
      step(-10.0f);
      for (size_t i = 0; i < parameters.size(); ++i) {
        reducer.wait_parameters_through(i);
        EXPECT_TRUE(updated_by(i, -10.0f)) << "parameter " << i << " rank " << comm.rank() << " of " << size;
      }
      step(-20.0f);
      reducer.zero_grad();
      reducer.begin_micro_batch(true);
      reducer.finish();  // with nothing waited for: it waits for the gather
      for (size_t i = 0; i < parameters.size(); ++i) {
        EXPECT_TRUE(updated_by(i, -20.0f)) << "parameter " << i << " rank " << comm.rank() << " of " << size;
      }
      EXPECT_EQ(reducer.wait_parameters(), 0.0);  // nothing left in flight
    }, transport);
  }
}

TEST(TensorCollectives, BlocksRefuseTensorsThatDoNotSplit) {
  run_ranks(2, [&](ccl::Communicator& comm) {
    EXPECT_THROW(reduce_scatter_blocks_async(torch::zeros({5}), comm, ccl::ReduceOp::sum), Error);
    EXPECT_THROW(allgather_blocks_async(torch::zeros({2, 2}), comm), Error);
  });
}

}  // namespace
}  // namespace giant::parallel
