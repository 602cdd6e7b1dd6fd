// Shared buffers: an allreduce in place on them reads the peers' buffers
// directly. Exact results over world sizes 1 to 4, whole buffers and
// stretches, repeated (the buffer is reused at once), across the engine's
// chunk boundaries, without shared memory (plain memory then), and a rank
// that passes plain memory where the others pass a shared buffer; the same
// for reduce-scatter and allgather in place.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
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

// The reduction with op of value(r, i) over ranks 0..n-1 (exact).
float reduced(ReduceOp op, int n, size_t i) {
  const float unit = static_cast<float>(i % 7 + 1);
  return op == ReduceOp::max ? n * unit : op == ReduceOp::avg ? unit * (n + 1) / 2.0f : unit * n * (n + 1) / 2;
}

// Every element of data[0, total) equals expected(i) exactly; the first few
// that do not are reported with `where`.
template <class Expected>
void expect_elements(const float* data, size_t total, Expected expected, const std::string& where) {
  size_t wrong = 0;
  for (size_t i = 0; i < total; ++i) {
    const float want = expected(i);
    if (data[i] != want && wrong++ < 3) ADD_FAILURE() << where << " element " << i << ": " << data[i] << " != " << want;
  }
  EXPECT_EQ(wrong, 0u) << where;
}

std::string where(Communicator& comm, int round) {
  return "n=" + std::to_string(comm.size()) + " rank " + std::to_string(comm.rank()) + " round " +
         std::to_string(round);
}

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
  expect_elements(data, total, [&](size_t i) {
    return i >= first && i < first + count ? reduced(op, comm.size(), i) : -1.0f - static_cast<float>(round);
  }, where(comm, round) + " first=" + std::to_string(first) + " count=" + std::to_string(count));
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

// Reduce-scatter in place (output = this rank's block of the input) on a
// stretch of a shared buffer: the rank's block holds the reduction, the other
// blocks and the rest of the buffer are untouched.
void check_reduce_scatter_stretch(Communicator& comm, SharedBuffer& buffer, size_t first, size_t block,
                                  ReduceOp op, int round) {
  auto* data = static_cast<float*>(buffer.data());
  const size_t total = buffer.nbytes() / sizeof(float);
  const int n = comm.size();
  const float outside = -1.0f - static_cast<float>(round);
  for (size_t i = 0; i < total; ++i) data[i] = outside;
  for (size_t i = 0; i < block * n; ++i) data[first + i] = value(comm.rank(), i);
  ReduceScatterOptions o;
  o.input = data + first;
  o.output = data + first + static_cast<size_t>(comm.rank()) * block;
  o.count = block;
  o.op = op;
  reduce_scatter(comm, o).wait();
  const size_t mine = first + static_cast<size_t>(comm.rank()) * block;
  expect_elements(data, total, [&](size_t i) {
    if (i >= mine && i < mine + block) return reduced(op, n, i - first);
    if (i >= first && i < first + block * n) return value(comm.rank(), i - first);
    return outside;
  }, where(comm, round) + " first=" + std::to_string(first) + " block=" + std::to_string(block));
}

// Allgather in place (input = this rank's block of the output): every block
// holds its owner's data afterwards, the rest of the buffer is untouched.
void check_allgather_stretch(Communicator& comm, SharedBuffer& buffer, size_t first, size_t block, int round) {
  auto* data = static_cast<float*>(buffer.data());
  const size_t total = buffer.nbytes() / sizeof(float);
  const int n = comm.size();
  const float outside = -1.0f - static_cast<float>(round);
  for (size_t i = 0; i < total; ++i) data[i] = outside;
  const size_t mine = first + static_cast<size_t>(comm.rank()) * block;
  for (size_t i = 0; i < block; ++i) data[mine + i] = value(comm.rank(), i + static_cast<size_t>(round));
  AllgatherOptions o;
  o.input = data + mine;
  o.output = data + first;
  o.count = block;
  allgather(comm, o).wait();
  expect_elements(data, total, [&](size_t i) {
    if (i < first || i >= first + block * n) return outside;
    const int owner = static_cast<int>((i - first) / block);
    return value(owner, (i - first) % block + static_cast<size_t>(round));
  }, where(comm, round) + " first=" + std::to_string(first) + " block=" + std::to_string(block));
}

TEST(SharedBuffer, ReduceScatterAndAllgatherInPlace) {
  for (int n = 1; n <= 4; ++n) {
    run_comm_threads(n, [&](Communicator& comm) {
      const size_t block = (1u << 20) / sizeof(float) + 3;  // 1 MiB and a bit, odd
      const size_t total = block * static_cast<size_t>(n) + 1000;
      auto buffer = allocate_shared_buffer(comm, total * sizeof(float));
      int round = 0;
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {
        check_reduce_scatter_stretch(comm, *buffer, 0, block, op, round++);
        check_reduce_scatter_stretch(comm, *buffer, 777, block, op, round++);  // a stretch in the middle
        check_reduce_scatter_stretch(comm, *buffer, 5, 1001, op, round++);     // small: not in place
      }
      for (size_t first : {size_t{0}, size_t{999}}) {
        check_allgather_stretch(comm, *buffer, first, block, round++);
        check_allgather_stretch(comm, *buffer, first, 1001, round++);
        check_allgather_stretch(comm, *buffer, first, 0, round++);
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

// The operation fails on this rank with a CommError that names a mismatch.
template <class Operation>
void expect_mismatch(Communicator& comm, Operation operation) {
  std::string what;
  try {
    operation();
  } catch (const CommError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("mismatch"), std::string::npos) << "rank " << comm.rank() << ": " << what;
}

TEST(SharedBuffer, PlainMemoryOnOneRankIsAMismatch) {
  run_comm_threads(2, [&](Communicator& comm) {
    const size_t total = 100000;
    auto buffer = allocate_shared_buffer(comm, total * sizeof(float));
    std::vector<float> plain(total, 1.0f);
    AllreduceOptions o;
    o.input = o.output = comm.rank() == 0 ? static_cast<float*>(buffer->data()) : plain.data();
    o.count = total;
    expect_mismatch(comm, [&] { allreduce(comm, o).wait(); });
  }, config_with("auto"));
}

TEST(SharedBuffer, ReduceScatterOnPlainMemoryOnOneRankIsAMismatch) {
  run_comm_threads(2, [&](Communicator& comm) {
    const size_t block = 100000;
    auto buffer = allocate_shared_buffer(comm, 2 * block * sizeof(float));
    std::vector<float> plain(2 * block, 1.0f);
    float* data = comm.rank() == 0 ? static_cast<float*>(buffer->data()) : plain.data();
    ReduceScatterOptions o;
    o.input = data;
    o.output = data + static_cast<size_t>(comm.rank()) * block;
    o.count = block;
    expect_mismatch(comm, [&] { reduce_scatter(comm, o).wait(); });
  }, config_with("auto"));
}

}  // namespace
}  // namespace giant::ccl::test
