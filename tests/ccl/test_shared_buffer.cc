// Shared buffers: an allreduce in place on them reads the peers' buffers
// directly. Exact results over world sizes 1 to 4, whole buffers and
// stretches, repeated (the buffer is reused at once), across the engine's
// chunk boundaries, without shared memory (plain memory then), and a rank
// that passes plain memory where the others pass a shared buffer.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ccl/support/ranks.h"
#include "giant/base/error.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/shared_buffer.h"

namespace giant::ccl::test {
namespace {

CommConfig config_with(const char* transport) {
  CommConfig config = test_config();
  config.transport = transport;
  return config;
}

// Rank r's element i: small integers, so every order of summation is exact.
float value(int rank, size_t i) { return static_cast<float>((rank + 1) * (i % 7 + 1)); }

// Fills [first, first + count) of the buffer, allreduces it in place with op,
// and checks it; the rest of the buffer must be untouched.
void check_stretch(Communicator& comm, SharedBuffer& buffer, size_t first, size_t count, ReduceOp op, int round) {
  auto* data = static_cast<float*>(buffer.data());
  const size_t total = buffer.nbytes() / sizeof(float);
  for (size_t i = 0; i < total; ++i) data[i] = -1.0f - static_cast<float>(round);
  for (size_t i = 0; i < count; ++i) data[first + i] = value(comm.rank(), first + i);
  AllreduceOptions o;
  o.input = o.output = data + first;
  o.count = count;
  o.op = op;
  allreduce(comm, o).wait();
  const int n = comm.size();
  size_t wrong = 0;
  for (size_t i = 0; i < total; ++i) {
    float expected = -1.0f - static_cast<float>(round);
    if (i >= first && i < first + count) {
      float unit = static_cast<float>(i % 7 + 1);
      expected = op == ReduceOp::max ? n * unit : op == ReduceOp::avg ? unit * (n + 1) / 2.0f : unit * n * (n + 1) / 2;
    }
    if (data[i] != expected && wrong++ < 3) {
      ADD_FAILURE() << "n=" << n << " rank " << comm.rank() << " round " << round << " element " << i << ": "
                    << data[i] << " != " << expected;
    }
  }
  EXPECT_EQ(wrong, 0u) << "n=" << n << " rank " << comm.rank() << " first=" << first << " count=" << count;
}

TEST(SharedBuffer, AllreduceInPlaceReadsPeersBuffers) {
  for (int n = 1; n <= 4; ++n) {
    run_comm_threads(n, [&](Communicator& comm) {
      const size_t total = (3u << 20) / sizeof(float) + 5;  // 3 MiB and a bit: several shm chunks
      auto buffer = allocate_shared_buffer(comm, total * sizeof(float));
      EXPECT_EQ(buffer->shared(), n > 1) << "n=" << n;
      int round = 0;
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {
        check_stretch(comm, *buffer, 0, total, op, round++);
        check_stretch(comm, *buffer, 12345, total / 2, op, round++);  // a stretch in the middle
        check_stretch(comm, *buffer, total - 9000, 9000, op, round++);  // small: the inline path
      }
    }, config_with("auto"));
  }
}

TEST(SharedBuffer, LargerThanAnEngineChunk) {
  run_comm_threads(3, [&](Communicator& comm) {
    const size_t total = (9u << 20) / sizeof(float) + 3;  // 9 MiB: crosses the 8 MiB chunk boundary
    auto buffer = allocate_shared_buffer(comm, total * sizeof(float));
    EXPECT_TRUE(buffer->shared());
    for (int round = 0; round < 2; ++round) check_stretch(comm, *buffer, 0, total, ReduceOp::sum, round);
  }, config_with("auto"));
}

TEST(SharedBuffer, PlainMemoryWithoutSharedMemory) {
  run_comm_threads(3, [&](Communicator& comm) {
    const size_t total = 100000;
    auto buffer = allocate_shared_buffer(comm, total * sizeof(float));
    EXPECT_FALSE(buffer->shared());
    check_stretch(comm, *buffer, 0, total, ReduceOp::sum, 0);
  }, config_with("tcp"));
}

TEST(SharedBuffer, SeveralBuffersAndReleaseInAnyOrder) {
  run_comm_threads(2, [&](Communicator& comm) {
    const size_t total = 50000;
    auto a = allocate_shared_buffer(comm, total * sizeof(float));
    auto b = allocate_shared_buffer(comm, total * sizeof(float));
    check_stretch(comm, *b, 0, total, ReduceOp::sum, 0);
    a.reset();  // b stays registered
    check_stretch(comm, *b, 100, total - 100, ReduceOp::sum, 1);
    auto c = allocate_shared_buffer(comm, 2 * total * sizeof(float));
    check_stretch(comm, *c, 0, 2 * total, ReduceOp::sum, 2);
  }, config_with("auto"));
}

TEST(SharedBuffer, PlainMemoryOnOneRankIsAMismatch) {
  run_comm_threads(2, [&](Communicator& comm) {
    const size_t total = 100000;
    auto buffer = allocate_shared_buffer(comm, total * sizeof(float));
    std::vector<float> plain(total, 1.0f);
    AllreduceOptions o;
    o.input = o.output = comm.rank() == 0 ? static_cast<float*>(buffer->data()) : plain.data();
    o.count = total;
    std::string what;
    try {
      allreduce(comm, o).wait();
    } catch (const CommError& e) {
      what = e.what();
    }
    EXPECT_NE(what.find("mismatch"), std::string::npos) << "rank " << comm.rank() << ": " << what;
  }, config_with("auto"));
}

}  // namespace
}  // namespace giant::ccl::test
