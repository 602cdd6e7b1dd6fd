// Every collective over ranks as threads (a MemoryStore shared by the
// threads), world sizes 1 to 5. The cases themselves live in
// support/{reduction,movement}_checks.cc and also run over processes
// (test_collectives_processes.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ccl/support/collective_checks.h"
#include "ccl/support/dtypes.h"
#include "ccl/support/ranks.h"

namespace giant::ccl::test {
namespace {

constexpr int kMaxWorldSize = 5;

// Each check runs with shared memory between the threads (ccl.transport
// auto: shm algorithms) and without it (tcp only).
void run_check_over_world_sizes(CheckFunction check, const char* name) {
  for (const char* transport : {"auto", "tcp"}) {
    CommConfig config = test_config();
    config.transport = transport;
    for (int n = 1; n <= kMaxWorldSize; ++n) {
      CollectivePlan plan;
      plan.store = std::make_shared<MemoryStore>();
      plan.store_prefix = name;
      run_comm_threads(n, [&](Communicator& comm) {
        Findings findings;
        check(comm, plan, findings);
        // Nobody tears down while a peer still finishes (see Teardown below for that case).
        run_op("final barrier", findings, [&] { return barrier(comm); });
        EXPECT_TRUE(findings.empty()) << name << " transport=" << transport << " n=" << n << " rank " << comm.rank()
                                      << ":\n" << findings.text();
      }, config);
    }
  }
}

TEST(CollectivesThreads, Allreduce) { run_check_over_world_sizes(check_allreduce, "allreduce"); }
TEST(CollectivesThreads, ReduceScatter) { run_check_over_world_sizes(check_reduce_scatter, "reduce_scatter"); }
TEST(CollectivesThreads, ReduceEveryRoot) { run_check_over_world_sizes(check_reduce, "reduce"); }
TEST(CollectivesThreads, Allgather) { run_check_over_world_sizes(check_allgather, "allgather"); }
TEST(CollectivesThreads, Allgatherv) { run_check_over_world_sizes(check_allgatherv, "allgatherv"); }
TEST(CollectivesThreads, Alltoall) { run_check_over_world_sizes(check_alltoall, "alltoall"); }
TEST(CollectivesThreads, Alltoallv) { run_check_over_world_sizes(check_alltoallv, "alltoallv"); }
TEST(CollectivesThreads, BroadcastEveryRoot) { run_check_over_world_sizes(check_broadcast, "broadcast"); }
TEST(CollectivesThreads, GatherEveryRoot) { run_check_over_world_sizes(check_gather, "gather"); }
TEST(CollectivesThreads, ScatterEveryRoot) { run_check_over_world_sizes(check_scatter, "scatter"); }
TEST(CollectivesThreads, Barrier) { run_check_over_world_sizes(check_barrier, "barrier"); }
TEST(CollectivesThreads, SendRecv) { run_check_over_world_sizes(check_send_recv, "send_recv"); }
TEST(CollectivesThreads, BitwiseIdenticalResults) {
  run_check_over_world_sizes(check_bitwise_identical, "bitwise_identical");
}
TEST(CollectivesThreads, InvalidArgumentsRejectedWhenIssued) {
  run_check_over_world_sizes(check_invalid_arguments, "invalid_arguments");
}

// Small pipeline segments (many segments per block, blocks of unequal
// size) and other socket counts, where segment and stripe boundaries fall
// inside blocks.
TEST(CollectivesThreads, SmallSegmentsAndOtherSocketCounts) {
  struct Tuning {
    size_t segment_bytes;
    int sockets_per_peer;
  };
  // 0: the alpha-beta model chooses the segment per call.
  for (Tuning tuning : {Tuning{4096, 1}, Tuning{16384, 3}, Tuning{0, 2}}) {
    CommConfig config = test_config();
    config.segment_bytes = tuning.segment_bytes;
    config.sockets_per_peer = tuning.sockets_per_peer;
    for (int n = 2; n <= kMaxWorldSize; ++n) {
      CollectivePlan plan;
      plan.counts = {4099, 65537};
      plan.dtypes = {DType::f32, DType::bf16};
      plan.ops = {ReduceOp::sum, ReduceOp::avg};
      plan.big_cases.clear();
      run_comm_threads(n, [&](Communicator& comm) {
        Findings findings;
        for (CheckFunction check : {check_allreduce, check_reduce_scatter, check_allgatherv, check_alltoall})
          check(comm, plan, findings);
        run_op("final barrier", findings, [&] { return barrier(comm); });
        EXPECT_TRUE(findings.empty()) << "segment_bytes=" << tuning.segment_bytes << " sockets_per_peer="
                                      << tuning.sockets_per_peer << " n=" << n << " rank " << comm.rank() << ":\n"
                                      << findings.text();
      }, config);
    }
  }
}

// OpOptions::segment_bytes overrides the communicator's segment for one call
// (here many segments per block where the communicator would use one).
TEST(CollectivesThreads, SegmentChosenPerCall) {
  CommConfig config = test_config();
  config.transport = "tcp";
  config.segment_bytes = 1 << 20;
  for (int n = 2; n <= 3; ++n) {
    run_comm_threads(n, [&](Communicator& comm) {
      Findings findings;
      for (size_t segment : {size_t{4096}, size_t{0}}) {
        const size_t count = 65537;
        const uint32_t salt = static_cast<uint32_t>(segment);
        Buffer input(DType::f32, count), output(DType::f32, count);
        input.fill([&](size_t i) { return reduction_input(DType::f32, ReduceOp::sum, comm.rank(), i, salt); });
        AllreduceOptions o;
        o.input = input.data();
        o.output = output.data();
        o.count = count;
        o.algorithm = Algorithm::ring;
        o.segment_bytes = segment;
        const std::string name = "allreduce with segment_bytes=" + std::to_string(segment);
        if (!run_op(name, findings, [&] { return allreduce(comm, o); })) continue;
        compare(output, 0, count,
                [&](size_t i) { return reduction_expected(DType::f32, ReduceOp::sum, comm.size(), i, salt); }, false,
                name, findings);
      }
      EXPECT_TRUE(findings.empty()) << "n=" << n << " rank " << comm.rank() << ":\n" << findings.text();
    }, config);
  }
}

// A rank whose part of an operation is done (a gather's non-root, once its
// data is sent) may destroy its communicator at once: peers that are still
// receiving what it sent must not fail.
TEST(Teardown, DestroyingRightAfterTheLastOperationDoesNotBreakPeers) {
  for (int n : {2, 3, 4, 5}) {
    auto store = std::make_shared<MemoryStore>();
    run_threads(n, [&](int rank) {
      auto comm = Communicator::create(store, rank, n, test_config());
      CollectivePlan plan;
      plan.counts = {1, 1000};
      plan.dtypes = {DType::f32, DType::u8};
      Findings findings;
      // Their last operations go to rank n-1: non-roots are done once their data is sent.
      check_reduce(*comm, plan, findings);
      check_gather(*comm, plan, findings);
      EXPECT_TRUE(findings.empty()) << "teardown n=" << n << " rank " << rank << ":\n" << findings.text();
    });
  }
}

// The harness's own f16/bf16 conversions, against known bit patterns: the
// exactness of every other check rests on them.
TEST(Harness, HalfConversion) {
  EXPECT_EQ(half_bits_from_float(1.0f), 0x3c00);
  EXPECT_EQ(half_bits_from_float(-2.0f), 0xc000);
  EXPECT_EQ(half_bits_from_float(65504.0f), 0x7bff);
  EXPECT_EQ(half_bits_from_float(65519.0f), 0x7bff);
  EXPECT_EQ(half_bits_from_float(65520.0f), 0x7c00);                      // rounds to infinity
  EXPECT_EQ(half_bits_from_float(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(half_bits_from_float(std::ldexp(1.0f, -25)), 0x0000);         // tie: to even (0)
  EXPECT_EQ(half_bits_from_float(std::ldexp(3.0f, -25)), 0x0002);         // tie: to even (2)
  EXPECT_EQ(half_bits_from_float(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(half_bits_from_float(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: to even
  EXPECT_EQ(half_bits_from_float(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie: to even
  EXPECT_EQ(half_bits_from_float(INFINITY), 0x7c00);
  EXPECT_TRUE(std::isnan(float_from_half_bits(half_bits_from_float(NAN))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {  // every non-NaN half round-trips
    const auto h = static_cast<uint16_t>(bits);
    const float f = float_from_half_bits(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(half_bits_from_float(f), h) << "half bits " << bits;
  }
}

TEST(Harness, BFloat16Conversion) {
  EXPECT_EQ(bfloat16_bits_from_float(1.0f), 0x3f80);
  EXPECT_EQ(bfloat16_bits_from_float(-3.0f), 0xc040);
  EXPECT_EQ(bfloat16_bits_from_float(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: to even
  EXPECT_EQ(bfloat16_bits_from_float(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie: to even
  EXPECT_EQ(bfloat16_bits_from_float(1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -9)), 0x3f81);
  EXPECT_EQ(bfloat16_bits_from_float(256.0f), 0x4380);
  EXPECT_EQ(float_from_bfloat16_bits(0x4348), 200.0f);
  EXPECT_TRUE(std::isnan(float_from_bfloat16_bits(bfloat16_bits_from_float(NAN))));
}

TEST(Harness, ReductionInputsAreExactInEveryDType) {
  for (DType dtype : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (int n = 1; n <= kMaxWorldSize; ++n) {
        for (size_t i = 0; i < 2000; ++i) {
          Buffer b(dtype, 1);
          const double sum_or_result = reduction_expected(dtype, op == ReduceOp::avg ? ReduceOp::sum : op, n, i);
          b.set(0, sum_or_result);
          ASSERT_EQ(b.get(0), sum_or_result) << dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << n;
        }
      }
    }
  }
  EXPECT_EQ(ulp(DType::f32, 1.0), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp(DType::f16, 3.0), std::ldexp(1.0, -9));
  EXPECT_EQ(ulp(DType::bf16, 200.0), 1.0);
  EXPECT_EQ(ulp(DType::i32, 5.0), 0.0);
}

}  // namespace
}  // namespace giant::ccl::test
