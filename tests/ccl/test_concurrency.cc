// Concurrency of ccl over ranks as threads: many operations in flight,
// waiting from another thread, communicators from split driven by their own
// threads while the parent is used, split colors and keys, tagged send/recv
// out of order, and host topology.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include "ccl/support/collective_checks.h"
#include "ccl/support/dtypes.h"
#include "ccl/support/ranks.h"
#include "giant/base/error.h"
#include "giant/base/timer.h"

namespace giant::ccl::test {
namespace {

// One allreduce prepared with known inputs; check() compares its output.
struct PreparedAllreduce {
  PreparedAllreduce(const Communicator& comm, DType dtype, ReduceOp op, size_t count, Algorithm algorithm,
                    uint32_t salt)
      : dtype(dtype), op(op), count(count), salt(salt), input(dtype, count), output(dtype, count) {
    input.fill([&](size_t i) { return reduction_input(dtype, op, comm.rank(), i, salt); });
    output.fill_bytes(0xEE);
    options.input = input.data();
    options.output = output.data();
    options.count = count;
    options.dtype = dtype;
    options.op = op;
    options.algorithm = algorithm;
    name = case_name("allreduce", comm, dtype, count, false,
                     std::string("op=") + reduce_op_name(op) + " algorithm=" + algorithm_name(algorithm) +
                         " salt=" + std::to_string(salt));
  }
  void check(int n, Findings& findings) const {
    compare(output, 0, count, [&](size_t i) { return reduction_expected(dtype, op, n, i, salt); },
            op == ReduceOp::avg, name, findings);
  }

  DType dtype;
  ReduceOp op;
  size_t count;
  uint32_t salt;
  Buffer input;
  Buffer output;
  AllreduceOptions options;
  std::string name;
};

void expect_no_findings(const Findings& findings, const Communicator& comm, const std::string& what) {
  EXPECT_TRUE(findings.empty()) << what << " n=" << comm.size() << " rank " << comm.rank() << ":\n"
                                << findings.text();
}

TEST(Concurrency, EightAllreducesInFlightBeforeAnyWait) {
  for (int n : {1, 2, 3, 4}) {
    run_comm_threads(n, [&](Communicator& comm) {
      const struct {
        DType dtype;
        ReduceOp op;
        size_t count;
        Algorithm algorithm;
      } cases[8] = {
          {DType::f32, ReduceOp::sum, 1000, Algorithm::ring},
          {DType::i32, ReduceOp::max, 7, Algorithm::halving_doubling},
          {DType::f64, ReduceOp::avg, 300000, Algorithm::automatic},
          {DType::u8, ReduceOp::sum, 1, Algorithm::ring},
          {DType::bf16, ReduceOp::prod, 65537, Algorithm::halving_doubling},
          {DType::f16, ReduceOp::min, 0, Algorithm::automatic},
          {DType::i64, ReduceOp::sum, kBigCount, Algorithm::ring},
          {DType::f32, ReduceOp::max, 4099, Algorithm::automatic},
      };
      std::vector<std::unique_ptr<PreparedAllreduce>> ops;
      std::vector<Work> works;
      for (int round = 0; round < 2; ++round) {
        ops.clear();
        works.clear();
        for (const auto& c : cases) {
          ops.push_back(std::make_unique<PreparedAllreduce>(comm, c.dtype, c.op, c.count, c.algorithm,
                                                            static_cast<uint32_t>(ops.size() + 10 * round)));
          works.push_back(allreduce(comm, ops.back()->options));
        }
        if (round == 0) {
          for (size_t i = works.size(); i-- > 0;) works[i].wait();  // last issued first
        } else {
          const Deadline deadline = Deadline::after(std::chrono::seconds(60));
          while (!std::all_of(works.begin(), works.end(), [](const Work& w) { return w.test(); })) {
            ASSERT_FALSE(deadline.expired()) << "operations did not complete";
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          for (const Work& w : works) ASSERT_EQ(w.error(), nullptr);
        }
        Findings findings;
        for (const auto& op : ops) op->check(comm.size(), findings);
        expect_no_findings(findings, comm, "round " + std::to_string(round));
      }
    });
  }
}

TEST(Concurrency, DifferentCollectivesInFlightTogether) {
  run_comm_threads(4, [&](Communicator& comm) {
    const int n = comm.size();
    const int rank = comm.rank();
    PreparedAllreduce sum(comm, DType::f32, ReduceOp::sum, 100003, Algorithm::automatic, 1);
    Buffer bcast(DType::i32, 5000);
    if (rank == 2) bcast.fill([](size_t i) { return static_cast<double>(i * 3); });
    Buffer gathered(DType::u8, 4 * 777);
    Buffer mine(DType::u8, 777);
    mine.fill([&](size_t i) { return movement_input(rank, i); });
    BroadcastOptions b;
    b.input = b.output = bcast.data();
    b.count = 5000;
    b.dtype = DType::i32;
    b.root = 2;
    AllgatherOptions g;
    g.input = mine.data();
    g.output = gathered.data();
    g.count = 777;
    g.dtype = DType::u8;
    std::vector<Work> works = {allreduce(comm, sum.options), broadcast(comm, b), allgather(comm, g),
                               barrier(comm)};
    for (size_t i = works.size(); i-- > 0;) works[i].wait();
    Findings findings;
    sum.check(n, findings);
    compare(bcast, 0, 5000, [](size_t i) { return static_cast<double>(i * 3); }, false, "broadcast", findings);
    compare(gathered, 0, 4 * 777, [](size_t j) { return movement_input(static_cast<int>(j / 777), j % 777); }, false,
            "allgather", findings);
    expect_no_findings(findings, comm, "mixed collectives in flight");
  });
}

TEST(Concurrency, WorkWaitedFromOtherThreads) {
  run_comm_threads(3, [&](Communicator& comm) {
    auto op = std::make_unique<PreparedAllreduce>(comm, DType::f32, ReduceOp::sum, 200001, Algorithm::ring, 3);
    Work work = allreduce(comm, op->options);
    // Three threads wait on the same Work; the issuer does other work meanwhile.
    std::vector<std::thread> waiters;
    std::atomic<int> waited_ok{0};
    for (int t = 0; t < 3; ++t) {
      waiters.emplace_back([&] {
        try {
          work.wait();
          ++waited_ok;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << comm.rank() << " waiter: " << e.what();
        }
      });
    }
    PreparedAllreduce other(comm, DType::i32, ReduceOp::min, 1000, Algorithm::automatic, 4);
    allreduce(comm, other.options).wait();
    for (auto& t : waiters) t.join();
    EXPECT_EQ(waited_ok.load(), 3);
    EXPECT_TRUE(work.test());
    Findings findings;
    op->check(comm.size(), findings);
    other.check(comm.size(), findings);
    // A Work issued here and waited only by a thread that outlives the issuing scope.
    auto late = std::make_shared<PreparedAllreduce>(comm, DType::f64, ReduceOp::max, 777, Algorithm::automatic, 5);
    std::thread waiter;
    {
      Work w = allreduce(comm, late->options);
      waiter = std::thread([w, late] {
        try {
          w.wait();
        } catch (const std::exception& e) {
          ADD_FAILURE() << "late waiter: " << e.what();
        }
      });
    }
    waiter.join();
    late->check(comm.size(), findings);
    expect_no_findings(findings, comm, "waited from other threads");
  });
}

TEST(Concurrency, SplitCommunicatorsDrivenByTheirOwnThreadsWhileParentIsUsed) {
  run_comm_threads(4, [&](Communicator& comm) {
    const int rank = comm.rank();
    auto whole = comm.split(0, rank);          // every rank, same order
    auto halves = comm.split(rank % 2, rank);  // {0, 2} and {1, 3}
    ASSERT_TRUE(whole && halves);
    ASSERT_EQ(whole->size(), 4);
    ASSERT_EQ(halves->size(), 2);
    const int iterations = 25;
    auto drive = [&](Communicator& c, uint32_t salt_base, Findings& findings) {
      for (int i = 0; i < iterations; ++i) {
        const DType dtype = i % 2 ? DType::f32 : DType::i64;
        PreparedAllreduce op(c, dtype, ReduceOp::sum, i % 5 == 0 ? 70001 : 1000 + i, Algorithm::automatic,
                             salt_base + i);
        if (!run_op(op.name, findings, [&] { return allreduce(c, op.options); })) return;
        op.check(c.size(), findings);
      }
    };
    Findings whole_findings, halves_findings, parent_findings;
    std::thread a([&] { drive(*whole, 100, whole_findings); });
    std::thread b([&] { drive(*halves, 200 + 1000 * (rank % 2), halves_findings); });
    drive(comm, 300, parent_findings);
    a.join();
    b.join();
    expect_no_findings(whole_findings, *whole, "split(0, rank) driven by its own thread");
    expect_no_findings(halves_findings, *halves, "split(rank % 2, rank) driven by its own thread");
    expect_no_findings(parent_findings, comm, "parent used concurrently");
  });
}

// The original ranks of a communicator's members, in its rank order.
std::vector<int> members_of(Communicator& sub, int original_rank) {
  std::vector<int32_t> members(sub.size(), -1);
  int32_t mine = original_rank;
  AllgatherOptions options;
  options.input = &mine;
  options.output = members.data();
  options.count = 1;
  options.dtype = DType::i32;
  allgather(sub, options).wait();
  return {members.begin(), members.end()};
}

TEST(Concurrency, SplitByColorAndKey) {
  run_comm_threads(5, [&](Communicator& comm) {
    const int rank = comm.rank();
    // Colors 0 (ranks 0, 2), 1 (ranks 1, 3), and rank 4 takes no part; keys reverse the order.
    auto sub = comm.split(rank == 4 ? -1 : rank % 2, -rank);
    if (rank == 4) {
      EXPECT_EQ(sub, nullptr);
    } else {
      ASSERT_NE(sub, nullptr);
      const std::vector<int> expected = rank % 2 == 0 ? std::vector<int>{2, 0} : std::vector<int>{3, 1};
      EXPECT_EQ(sub->size(), 2);
      EXPECT_EQ(sub->rank(), rank < 2 ? 1 : 0) << "rank " << rank;
      EXPECT_EQ(members_of(*sub, rank), expected) << "rank " << rank;
      // A split of a split.
      auto single = sub->split(sub->rank(), 0);
      ASSERT_NE(single, nullptr);
      EXPECT_EQ(single->size(), 1);
      EXPECT_EQ(single->rank(), 0);
      EXPECT_EQ(members_of(*single, rank), std::vector<int>{rank});
    }
    // Equal keys: ordered by rank. Keys as a permutation: ordered by key.
    auto same_key = comm.split(7, 0);
    ASSERT_NE(same_key, nullptr);
    EXPECT_EQ(same_key->rank(), rank);
    EXPECT_EQ(members_of(*same_key, rank), (std::vector<int>{0, 1, 2, 3, 4}));
    const int keys[5] = {30, 10, 40, 20, 0};  // order: 4, 1, 3, 0, 2
    auto permuted = comm.split(1, keys[rank]);
    ASSERT_NE(permuted, nullptr);
    EXPECT_EQ(members_of(*permuted, rank), (std::vector<int>{4, 1, 3, 0, 2}));
    EXPECT_EQ(permuted->rank(), (std::vector<int>{3, 1, 4, 2, 0})[rank]);
    // The parent still works after the splits.
    PreparedAllreduce op(comm, DType::i32, ReduceOp::sum, 1000, Algorithm::automatic, 9);
    allreduce(comm, op.options).wait();
    Findings findings;
    op.check(comm.size(), findings);
    expect_no_findings(findings, comm, "parent after splits");
  });
  // World size 1.
  run_comm_threads(1, [&](Communicator& comm) {
    EXPECT_EQ(comm.split(-1, 0), nullptr);
    auto self = comm.split(3, 5);
    ASSERT_NE(self, nullptr);
    EXPECT_EQ(self->size(), 1);
  });
}

// A byte payload that depends on who sent it, the tag and a variant.
Buffer payload(int sender, uint32_t tag, size_t nbytes, int variant = 0) {
  Buffer b(DType::u8, nbytes);
  b.fill([&](size_t i) { return static_cast<double>((pattern(sender + 10 * variant, i, tag) * 7 + variant) & 0xff); });
  return b;
}

Work send_buffer(Communicator& comm, const Buffer& b, int peer, uint32_t tag) {
  SendOptions options;
  options.buffer = b.data();
  options.nbytes = b.nbytes();
  options.peer = peer;
  options.tag = tag;
  return send(comm, options);
}

Work recv_buffer(Communicator& comm, Buffer& b, int peer, uint32_t tag) {
  RecvOptions options;
  options.buffer = b.data();
  options.nbytes = b.nbytes();
  options.peer = peer;
  options.tag = tag;
  return recv(comm, options);
}

void expect_payload(const Buffer& got, int sender, uint32_t tag, int variant, const std::string& what) {
  const Buffer want = payload(sender, tag, got.nbytes(), variant);
  EXPECT_TRUE(got.bytes() == want.bytes()) << what << ": wrong bytes (tag " << tag << ", variant " << variant << ")";
}

// Point-to-point runs through the shared-memory mailboxes between threads
// (ccl.transport=auto) and over TCP: each test runs on both.
void on_both_transports(int n, const std::function<void(Communicator& comm)>& body) {
  for (const char* transport : {"auto", "tcp"}) {
    SCOPED_TRACE(std::string("ccl.transport=") + transport);
    CommConfig config = test_config(std::chrono::seconds(10));
    config.transport = transport;
    run_comm_threads(n, body, config);
  }
}

TEST(Concurrency, TaggedSendRecvOutOfOrder) {
  const size_t sizes[4] = {1000, 3 << 20, 17, 5000};  // by tag - 1; tag 2 is large
  on_both_transports(2, [&](Communicator& comm) {
    if (comm.rank() == 0) {
      std::vector<Buffer> outgoing;
      for (uint32_t tag = 1; tag <= 3; ++tag) outgoing.push_back(payload(0, tag, sizes[tag - 1]));
      outgoing.push_back(payload(0, 4, sizes[3], 0));  // same tag twice: first...
      outgoing.push_back(payload(0, 4, sizes[3], 1));  // ...then second
      std::vector<Work> works;
      for (uint32_t tag = 1; tag <= 3; ++tag) works.push_back(send_buffer(comm, outgoing[tag - 1], 1, tag));
      works.push_back(send_buffer(comm, outgoing[3], 1, 4));
      works.push_back(send_buffer(comm, outgoing[4], 1, 4));
      for (size_t i = works.size(); i-- > 0;) works[i].wait();
    } else {
      // Receive 3, then 1, then 2, each waited before the next is issued.
      for (uint32_t tag : {3u, 1u, 2u}) {
        Buffer incoming(DType::u8, sizes[tag - 1]);
        recv_buffer(comm, incoming, 0, tag).wait();
        expect_payload(incoming, 0, tag, 0, "out-of-order receive");
      }
      Buffer first(DType::u8, sizes[3]), second(DType::u8, sizes[3]);
      Work a = recv_buffer(comm, first, 0, 4);
      Work b = recv_buffer(comm, second, 0, 4);
      b.wait();
      a.wait();
      expect_payload(first, 0, 4, 0, "same tag, first message");
      expect_payload(second, 0, 4, 1, "same tag, second message");
    }
  });
}

TEST(Concurrency, RecvIssuedBeforeTheMatchingSend) {
  std::atomic<int> posted{0};  // receives posted so far, one per transport
  int sent = 0;                 // rank 0's sends so far
  on_both_transports(2, [&](Communicator& comm) {
    const uint32_t tag = 7;
    const size_t nbytes = 2 << 20;
    if (comm.rank() == 1) {
      Buffer incoming(DType::u8, nbytes);
      Work w = recv_buffer(comm, incoming, 0, tag);
      posted.fetch_add(1);
      w.wait();
      expect_payload(incoming, 0, tag, 0, "receive posted first");
    } else {
      const Deadline deadline = Deadline::after(std::chrono::seconds(20));
      while (posted.load() <= sent && !deadline.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Buffer outgoing = payload(0, tag, nbytes);
      send_buffer(comm, outgoing, 1, tag).wait();
      ++sent;
    }
  });
}

TEST(Concurrency, BothSidesReceiveThenSendWithoutDeadlock) {
  for (size_t nbytes : {size_t{0}, size_t{10}, size_t{8} << 20}) {
    on_both_transports(2, [&](Communicator& comm) {
      const int peer = 1 - comm.rank();
      Buffer incoming(DType::u8, nbytes);
      Buffer outgoing = payload(comm.rank(), 9, nbytes);
      Work r = recv_buffer(comm, incoming, peer, 9);
      Work s = send_buffer(comm, outgoing, peer, 9);
      r.wait();
      s.wait();
      expect_payload(incoming, peer, 9, 0, "exchange of " + std::to_string(nbytes) + " bytes");
    });
  }
}

TEST(Concurrency, EveryPairExchangesOnTheSameTag) {
  on_both_transports(4, [&](Communicator& comm) {
    const int n = comm.size();
    const int rank = comm.rank();
    std::vector<Buffer> incoming, outgoing;
    for (int peer = 0; peer < n; ++peer) {
      incoming.emplace_back(DType::u8, 4096 + 100 * rank + peer);  // sized by (receiver, sender)
      outgoing.push_back(payload(rank, 5, 4096 + 100 * peer + rank));
    }
    std::vector<Work> works;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      works.push_back(recv_buffer(comm, incoming[peer], peer, 5));
      works.push_back(send_buffer(comm, outgoing[peer], peer, 5));
    }
    for (auto& w : works) w.wait();
    for (int peer = 0; peer < n; ++peer)
      if (peer != rank) expect_payload(incoming[peer], peer, 5, 0, "from rank " + std::to_string(peer));
  });
}

TEST(Concurrency, SizeMismatchOfAMessageFailsBothSides) {
  // The receiver names the mismatch; the sender, whose bytes may already be
  // on their way, learns it from the receiver's report at its next operation.
  on_both_transports(2, [&](Communicator& comm) {
    std::string error;
    try {
      if (comm.rank() == 0) {
        Buffer outgoing = payload(0, 3, 1000);
        send_buffer(comm, outgoing, 1, 3).wait();
      } else {
        Buffer incoming(DType::u8, 999);
        recv_buffer(comm, incoming, 0, 3).wait();
      }
      barrier(comm).wait();
    } catch (const CommError& e) {
      error = e.what();
    }
    EXPECT_NE(error.find("mismatch"), std::string::npos) << "rank " << comm.rank() << ": '" << error << "'";
    EXPECT_TRUE(comm.failed()) << "rank " << comm.rank();
  });
}

void expect_allreduce_works(Communicator& comm, const std::string& what) {
  PreparedAllreduce op(comm, DType::f32, ReduceOp::sum, 300001, Algorithm::automatic, 12);
  Findings findings;
  if (run_op(op.name, findings, [&] { return allreduce(comm, op.options); })) op.check(comm.size(), findings);
  PreparedAllreduce small(comm, DType::i32, ReduceOp::max, 77, Algorithm::automatic, 13);
  if (run_op(small.name, findings, [&] { return allreduce(comm, small.options); })) small.check(comm.size(), findings);
  expect_no_findings(findings, comm, what);
}

TEST(Concurrency, HostTopologyFromHostIds) {
  // Two hosts of two ranks each.
  run_comm_threads(4, [&](Communicator& comm) {
    const int rank = comm.rank();
    const HostTopology& t = comm.topology();
    EXPECT_EQ(t.host_ids, (std::vector<std::string>{"hostA", "hostB"}));
    EXPECT_EQ(t.host_of_rank, (std::vector<int>{0, 0, 1, 1}));
    EXPECT_EQ(t.num_hosts(), 2);
    EXPECT_EQ(t.host, rank / 2);
    EXPECT_EQ(t.local_rank, rank % 2);
    EXPECT_EQ(t.local_size, 2);
    EXPECT_EQ(t.local_ranks, (std::vector<int>{rank / 2 * 2, rank / 2 * 2 + 1}));
    EXPECT_TRUE(t.same_host(0, 1));
    EXPECT_FALSE(t.same_host(1, 2));
    expect_allreduce_works(comm, "allreduce over two hosts");
  }, [](int rank) {
    CommConfig config = test_config();
    config.host_id = rank < 2 ? "hostA" : "hostB";
    return config;
  });
  // Three hosts, interleaved: x y x z y.
  const std::vector<std::string> ids = {"x", "y", "x", "z", "y"};
  run_comm_threads(5, [&](Communicator& comm) {
    const int rank = comm.rank();
    const HostTopology& t = comm.topology();
    EXPECT_EQ(t.host_ids, (std::vector<std::string>{"x", "y", "z"}));
    EXPECT_EQ(t.host_of_rank, (std::vector<int>{0, 1, 0, 2, 1}));
    EXPECT_EQ(t.host, (std::vector<int>{0, 1, 0, 2, 1})[rank]);
    EXPECT_EQ(t.local_rank, (std::vector<int>{0, 0, 1, 0, 1})[rank]);
    EXPECT_EQ(t.local_size, (std::vector<int>{2, 2, 2, 1, 2})[rank]);
    const std::vector<std::vector<int>> locals = {{0, 2}, {1, 4}, {0, 2}, {3}, {1, 4}};
    EXPECT_EQ(t.local_ranks, locals[rank]);
    expect_allreduce_works(comm, "allreduce over three interleaved hosts");
    // Ranks 0, 2, 4 (hosts x, x, y) keep their hosts in the split.
    auto even = comm.split(rank % 2, rank);
    ASSERT_NE(even, nullptr);
    if (rank % 2 == 0) {
      const HostTopology& s = even->topology();
      EXPECT_EQ(s.host_ids, (std::vector<std::string>{"x", "y"}));
      EXPECT_EQ(s.host_of_rank, (std::vector<int>{0, 0, 1}));
      EXPECT_EQ(s.local_rank, (std::vector<int>{0, 1, 0})[even->rank()]);
      EXPECT_EQ(s.local_size, (std::vector<int>{2, 2, 1})[even->rank()]);
    }
    expect_allreduce_works(*even, "allreduce on a split over hosts");
  }, [&](int rank) {
    CommConfig config = test_config();
    config.host_id = ids[rank];
    return config;
  });
  // By default every thread is on this host.
  run_comm_threads(3, [&](Communicator& comm) {
    const HostTopology& t = comm.topology();
    EXPECT_EQ(t.num_hosts(), 1);
    ASSERT_EQ(t.host_ids.size(), 1u);
    EXPECT_EQ(t.host_ids[0], default_host_id());
    EXPECT_EQ(t.local_rank, comm.rank());
    EXPECT_EQ(t.local_size, 3);
    EXPECT_EQ(t.local_ranks, (std::vector<int>{0, 1, 2}));
  });
}

}  // namespace
}  // namespace giant::ccl::test
