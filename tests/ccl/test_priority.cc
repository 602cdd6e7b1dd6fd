// The chunked priority engine: a small urgent allreduce issued after a large
// one overtakes it at a chunk boundary, over tcp and over shared memory, and
// ranks that issue or wait differently still agree and never deadlock.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "ccl/support/ranks.h"
#include "giant/ccl/collectives.h"

namespace giant::ccl::test {
namespace {

constexpr size_t kBulkCount = (64u << 20) / sizeof(float);  // 64 MiB
constexpr size_t kSmallCount = 1024;

CommConfig config_for(const char* transport) {
  CommConfig config = test_config();
  config.transport = transport;
  return config;
}

struct Buffers {
  std::vector<float> bulk;
  std::vector<float> small_in;
  std::vector<float> small_out;
  Buffers(int rank) : bulk(kBulkCount, static_cast<float>(rank + 1)), small_in(kSmallCount, 1.0f), small_out(kSmallCount) {}
};

Work issue_bulk(Communicator& comm, Buffers& b, int priority) {
  AllreduceOptions o;
  o.input = b.bulk.data();
  o.output = b.bulk.data();
  o.count = b.bulk.size();
  o.priority = priority;
  return allreduce(comm, o);
}

Work issue_small(Communicator& comm, Buffers& b, int priority) {
  AllreduceOptions o;
  o.input = b.small_in.data();
  o.output = b.small_out.data();
  o.count = b.small_in.size();
  o.priority = priority;
  return allreduce(comm, o);
}

void expect_results(const Communicator& comm, const Buffers& b) {
  const int n = comm.size();
  const float bulk_sum = static_cast<float>(n * (n + 1) / 2);
  EXPECT_EQ(b.bulk.front(), bulk_sum);
  EXPECT_EQ(b.bulk[b.bulk.size() / 2], bulk_sum);
  EXPECT_EQ(b.bulk.back(), bulk_sum);
  EXPECT_EQ(b.small_out.front(), static_cast<float>(n));
  EXPECT_EQ(b.small_out.back(), static_cast<float>(n));
}

// Whether `other` is still running when `work` has finished. A completed
// Work is finished before the engine starts the next operation, so with
// issue order kept this is false, and with `work` overtaking it is true
// (the rest of a 64 MiB allreduce takes many milliseconds).
bool still_running_after(const Work& work, const Work& other) {
  work.wait();
  return !other.test();
}

class Priority : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(Priority, UrgentSmallAllreduceOvertakesBulk) {
  const auto [transport, n] = GetParam();
  run_comm_threads(n, [&](Communicator& comm) {
    Buffers b(comm.rank());
    Work bulk = issue_bulk(comm, b, 0);
    Work small = issue_small(comm, b, 10);
    EXPECT_TRUE(still_running_after(small, bulk)) << "transport=" << transport << " n=" << n << " rank "
                                                  << comm.rank() << ": the urgent allreduce did not finish first";
    small.wait();
    bulk.wait();
    expect_results(comm, b);
  }, config_for(transport));
}

TEST_P(Priority, EqualPrioritiesRunInIssueOrder) {
  const auto [transport, n] = GetParam();
  run_comm_threads(n, [&](Communicator& comm) {
    Buffers b(comm.rank());
    Work bulk = issue_bulk(comm, b, 0);
    Work small = issue_small(comm, b, 0);
    EXPECT_FALSE(still_running_after(small, bulk)) << "transport=" << transport << " rank " << comm.rank();
    small.wait();
    bulk.wait();
    expect_results(comm, b);
  }, config_for(transport));
}

// Rank 0 issues both at once; the others wait for the bulk before issuing
// the urgent one. Rank 0 must not run it ahead of a bulk its peers need
// first, and everyone ends with the right results.
TEST_P(Priority, RanksThatWaitBeforeIssuingDoNotDeadlock) {
  const auto [transport, n] = GetParam();
  run_comm_threads(n, [&](Communicator& comm) {
    Buffers b(comm.rank());
    Work bulk = issue_bulk(comm, b, 0);
    if (comm.rank() != 0) bulk.wait();
    Work small = issue_small(comm, b, 10);
    small.wait();
    bulk.wait();
    expect_results(comm, b);
  }, config_for(transport));
}

// Several urgent operations of different priorities behind two bulks, issued
// from the same thread: all complete with the right results.
TEST_P(Priority, ManyUrgentOperationsBehindTwoBulks) {
  const auto [transport, n] = GetParam();
  run_comm_threads(n, [&](Communicator& comm) {
    Buffers b1(comm.rank()), b2(comm.rank());
    std::vector<std::vector<float>> ins(6, std::vector<float>(kSmallCount, 1.0f));
    std::vector<std::vector<float>> outs(6, std::vector<float>(kSmallCount));
    std::vector<Work> works{issue_bulk(comm, b1, -1), issue_bulk(comm, b2, 0)};
    for (int i = 0; i < 6; ++i) {
      AllreduceOptions o;
      o.input = ins[i].data();
      o.output = outs[i].data();
      o.count = kSmallCount;
      o.priority = i % 3;
      works.push_back(allreduce(comm, o));
    }
    for (auto& w : works) w.wait();
    b1.small_out.assign(kSmallCount, static_cast<float>(comm.size()));
    b2.small_out = b1.small_out;
    expect_results(comm, b1);
    expect_results(comm, b2);
    for (const auto& out : outs) EXPECT_EQ(out.front(), static_cast<float>(comm.size()));
  }, config_for(transport));
}

INSTANTIATE_TEST_SUITE_P(TransportsAndSizes, Priority,
                         ::testing::Combine(::testing::Values("tcp", "auto"), ::testing::Values(2, 3)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace giant::ccl::test
