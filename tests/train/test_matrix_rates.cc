// The run's matrix-product rates: measured once, the ranks of a host taking
// turns (none is timed while a neighbour works), the slowest rank's figure
// on every rank; and MFU as model FLOPs per second per rank against that
// per-rank rate. Ranks run as threads over one MemoryStore, two "hosts" told
// apart by their host ids.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/train/matmul_rate.h"
#include "giant/train/trainer.h"
#include "train/support/thread_ranks.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

using Clock = std::chrono::steady_clock;
using test::keys_with;
using test::on_ranks;

TEST(MatrixRates, RanksOfAHostTakeTurnsAndAllGetTheSlowestFigure) {
  const std::vector<std::string> hosts{"a", "a", "a", "b", "b"};
  struct Interval {
    Clock::time_point start, end;
  };
  std::mutex mutex;
  std::vector<std::vector<Interval>> probed(hosts.size());
  std::vector<MatrixRates> results(hosts.size());
  on_ranks(hosts, [&](int rank, const std::shared_ptr<ccl::Communicator>& world) {
    auto probe = [&](const std::vector<Precision>& precisions) {
      EXPECT_EQ(precisions, (std::vector<Precision>{Precision::fp32, Precision::bf16}));
      const Interval at{Clock::now(), {}};
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      std::lock_guard lock(mutex);
      probed[rank].push_back({at.start, Clock::now()});
      return MatrixRates{100.0 + rank, 200.0 - rank, 0};
    };
    results[rank] = measure_matrix_rates({Precision::fp32, Precision::bf16}, 1, world.get(), probe);
  });
  for (size_t r = 0; r < hosts.size(); ++r) {
    ASSERT_EQ(probed[r].size(), 1u) << "rank " << r << " measured once";
    EXPECT_EQ(results[r].fp32, 100.0) << r;  // rank 0's, the slowest fp32
    EXPECT_EQ(results[r].bf16, 196.0) << r;  // rank 4's, the slowest bf16
    EXPECT_EQ(results[r].fp16, 0.0) << r;
    for (size_t q = 0; q < r; ++q) {
      if (hosts[q] != hosts[r]) continue;
      const bool apart = probed[q][0].end <= probed[r][0].start || probed[r][0].end <= probed[q][0].start;
      EXPECT_TRUE(apart) << "ranks " << q << " and " << r << " of one host measured at the same time";
    }
  }
}

TEST(MatrixRates, OneProcessMeasuresAlone) {
  int calls = 0;
  const MatrixRates rates = measure_matrix_rates({Precision::fp32}, 1, nullptr, [&](const auto&) {
    ++calls;
    return MatrixRates{42, 0, 0};
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(rates.of(Precision::fp32), 42);
  // The real probe: the reference product in fp32 runs at a positive rate.
  EXPECT_GT(probe_reference_products({Precision::fp32}).fp32, 0);
}

// A bf16 product no faster than fp32's is timed once, not closely: auto
// cannot choose it, and MFU does not use it.
TEST(MatrixRates, ASlowerPrecisionIsNotTimedClosely) {
  const auto start = Clock::now();
  EXPECT_GT(measure_gemm_flops(64, 64, 64, Precision::fp32, 1000, 5.0, /*give_up_below=*/1e30), 0);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(2500)) << "timed for its 5 s instead of giving up";
}

// MFU = model FLOPs per step / ranks / step time / the per-rank rate, with
// the rate handed to the trainer (measured once by the caller).
TEST(MatrixRates, MfuIsModelFlopsPerRankAgainstTheRankRate) {
  const test::TempDir dir("giant-matrix-rates");
  const std::vector<std::string> o{"train.steps=4", "parallel.dp=2", "train.micro_batch=4", "train.global_batch=8",
                                   "model.layers=1", "model.hidden=32", "model.heads=2", "model.seq_len=16",
                                   "train.eval_every=0", "train.eval_batches=1", "train.sample_tokens=0",
                                   "train.threads=1", "train.tensorboard=false",
                                   "data.path=\"" + std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt\"",
                                   "train.out_dir=\"" + dir.path() + "/out\""};
  const MatrixRates given{3e9, 0, 0};
  std::vector<TrainSummary> summaries(2);
  on_ranks({"a", "a"}, [&](int rank, const std::shared_ptr<ccl::Communicator>& world) {
    std::ostringstream out;
    summaries[rank] = Trainer(run_config_from(keys_with(o)), "", out, false, {}, world, given).run();
  });
  for (const TrainSummary& s : summaries) {
    EXPECT_EQ(s.matmul_flops, given.fp32);
    // Three steps after the first (which pays for warm-up): the median MFU is the median step's.
    const double expected = s.model_flops_per_step / 2 / s.step_s_median / given.fp32;
    EXPECT_NEAR(s.mfu_median, expected, 1e-9 * expected);
  }
}

}  // namespace
}  // namespace giant::train
