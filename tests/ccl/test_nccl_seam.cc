// The device-backend seam's contract, through a fake device backend that
// needs no device: like NCCL's, it makes a communicator of its own from the
// store prefix it is given (here a host one, to which it forwards each
// operation). Device operations reach it and host ones do not; it is made
// once per communicator, on the first device operation, on every rank at
// once; splits make their own; every call is checked before it gets there;
// abort reaches it and, through it, the peers.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ccl/support/ranks.h"
#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/backend.h"
#include "giant/ccl/collectives.h"

namespace giant::ccl::test {
namespace {

// What the fake backends of one test did, per communicator and rank in it.
class Counters {
 public:
  enum Event { made, calls, aborts };
  void count(Event event, const Communicator& comm) { count(event, comm.name(), comm.rank()); }
  void count(Event event, const std::string& name, int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++counts_[{event, name, rank}];
  }
  int of(Event event, const Communicator& comm) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = counts_.find({event, comm.name(), comm.rank()});
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::tuple<Event, std::string, int>, int> counts_;
};

class ForwardingBackend final : public Backend {
 public:
  ForwardingBackend(const DeviceBackendContext& context, Counters& counters)
      : name_(context.name), rank_(context.rank), counters_(counters) {
    std::shared_ptr<Store> store;
    if (context.store) store = std::make_shared<PrefixStore>(context.store, context.store_prefix);
    inner_ = Communicator::create(store, context.rank, context.size, context.config, context.name + "/fake-device");
    counters_.count(Counters::made, name_, rank_);
  }
  const char* name() const override { return "fake"; }

  Work allreduce(const AllreduceOptions& o) override { return host().allreduce(on_host(o)); }
  Work reduce_scatter(const ReduceScatterOptions& o) override { return host().reduce_scatter(on_host(o)); }
  Work allgather(const AllgatherOptions& o) override { return host().allgather(on_host(o)); }
  Work allgatherv(const AllgathervOptions& o) override { return host().allgatherv(on_host(o)); }
  Work alltoall(const AlltoallOptions& o) override { return host().alltoall(on_host(o)); }
  Work alltoallv(const AlltoallvOptions& o) override { return host().alltoallv(on_host(o)); }
  Work broadcast(const BroadcastOptions& o) override { return host().broadcast(on_host(o)); }
  Work reduce(const ReduceOptions& o) override { return host().reduce(on_host(o)); }
  Work gather(const GatherOptions& o) override { return host().gather(on_host(o)); }
  Work scatter(const ScatterOptions& o) override { return host().scatter(on_host(o)); }
  Work barrier(const BarrierOptions& o) override { return host().barrier(on_host(o)); }
  Work send(const SendOptions& o) override { return host().send(on_host(o)); }
  Work recv(const RecvOptions& o) override { return host().recv(on_host(o)); }
  void abort(const std::string& reason) override {
    counters_.count(Counters::aborts, name_, rank_);
    inner_->abort(reason);
  }
  bool failed() const override { return inner_->failed(); }

 private:
  Backend& host() {
    counters_.count(Counters::calls, name_, rank_);
    return inner_->backend(Memory::host);
  }
  template <class Options>
  static Options on_host(Options options) {
    EXPECT_EQ(options.memory, Memory::device);
    options.memory = Memory::host;
    options.stream = nullptr;
    return options;
  }

  std::string name_;
  int rank_;
  Counters& counters_;
  std::shared_ptr<Communicator> inner_;
};

DeviceBackendFactory fake_factory(Counters& counters) {
  return [&counters](const DeviceBackendContext& context) {
    return std::make_unique<ForwardingBackend>(context, counters);
  };
}

// Ranks as threads, each with a communicator whose device backend is the fake.
void run_with_fake(int n, Counters& counters, const std::function<void(Communicator&)>& body) {
  auto store = std::make_shared<MemoryStore>();
  run_threads(n, [&](int rank) {
    auto comm = Communicator::create(store, rank, n, test_config(), "world", fake_factory(counters));
    body(*comm);
  });
}

std::vector<float> allreduce_on(Communicator& comm, Memory memory, std::vector<float> values) {
  AllreduceOptions o;
  o.memory = memory;
  o.input = o.output = values.data();
  o.count = values.size();
  allreduce(comm, o).wait();
  return values;
}

TEST(NcclSeam, DeviceOperationsRunOnTheDeviceBackendMadeOnFirstUse) {
  Counters counters;
  constexpr int n = 3;
  run_with_fake(n, counters, [&](Communicator& comm) {
    const int rank = comm.rank();
    EXPECT_EQ(allreduce_on(comm, Memory::host, {1.0f}), std::vector<float>{3.0f});
    EXPECT_EQ(counters.of(Counters::made, comm), 0) << "a host operation made the device backend";
    EXPECT_EQ(allreduce_on(comm, Memory::device, {float(rank), 1.0f}), (std::vector<float>{3.0f, 3.0f}));
    EXPECT_EQ(counters.of(Counters::made, comm), 1);

    std::vector<int32_t> mine{rank, 10 * rank}, all(2 * n);
    AllgatherOptions g;
    g.memory = Memory::device;
    g.input = mine.data();
    g.output = all.data();
    g.count = 2;
    g.dtype = DType::i32;
    allgather(comm, g).wait();
    EXPECT_EQ(all, (std::vector<int32_t>{0, 0, 1, 10, 2, 20}));

    // A ring of device messages.
    int32_t out = rank, in = -1;
    SendOptions s;
    s.memory = Memory::device;
    s.buffer = &out;
    s.nbytes = sizeof out;
    s.peer = (rank + 1) % n;
    RecvOptions r;
    r.memory = Memory::device;
    r.buffer = &in;
    r.nbytes = sizeof in;
    r.peer = (rank + n - 1) % n;
    Work sent = send(comm, s);
    recv(comm, r).wait();
    sent.wait();
    EXPECT_EQ(in, (rank + n - 1) % n);

    BarrierOptions b;
    b.memory = Memory::device;
    barrier(comm, b).wait();
    EXPECT_EQ(counters.of(Counters::made, comm), 1) << "the device backend was made more than once";
    EXPECT_EQ(counters.of(Counters::calls, comm), 5);
    EXPECT_STREQ(comm.backend(Memory::device).name(), "fake");
    EXPECT_STREQ(comm.backend(Memory::host).name(), "host");
  });
}

TEST(NcclSeam, SplitCommunicatorsMakeTheirOwnWithTheParentsFactory) {
  Counters counters;
  run_with_fake(4, counters, [&](Communicator& comm) {
    auto half = comm.split(comm.rank() % 2, comm.rank());
    ASSERT_NE(half, nullptr);
    EXPECT_EQ(allreduce_on(*half, Memory::device, {float(comm.rank())}),
              std::vector<float>{comm.rank() % 2 == 0 ? 2.0f : 4.0f});
    EXPECT_EQ(counters.of(Counters::made, *half), 1);
    EXPECT_EQ(counters.of(Counters::made, comm), 0);
    EXPECT_EQ(allreduce_on(comm, Memory::device, {1.0f}), std::vector<float>{4.0f});
    EXPECT_EQ(counters.of(Counters::made, comm), 1);
    EXPECT_EQ(counters.of(Counters::made, *half), 1);
  });
}

void expect_refused(const std::function<Work()>& issue, const std::string& words) {
  try {
    issue();
    ADD_FAILURE() << "no error; expected one saying '" << words << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(NcclSeam, CallsAreCheckedBeforeTheyReachTheBackend) {
  Counters counters;
  run_with_fake(2, counters, [&](Communicator& comm) {
    int32_t value = 1;
    AllreduceOptions a;
    a.memory = Memory::device;
    a.count = 1;
    expect_refused([&] { return allreduce(comm, a); }, "must not be null");
    a.input = a.output = &value;
    a.dtype = DType::i32;
    a.op = ReduceOp::avg;
    expect_refused([&] { return allreduce(comm, a); }, "avg is defined for floating dtypes only");
    BroadcastOptions b;
    b.memory = Memory::device;
    b.input = b.output = &value;
    b.count = 1;
    b.dtype = DType::i32;
    b.root = 2;
    expect_refused([&] { return broadcast(comm, b); }, "root 2 is not a rank");
    SendOptions s;
    s.memory = Memory::device;
    s.buffer = &value;
    s.nbytes = sizeof value;
    s.peer = comm.rank();
    expect_refused([&] { return send(comm, s); }, "cannot exchange messages with itself");
    AllgathervOptions v;
    v.memory = Memory::device;
    v.counts = {1};
    expect_refused([&] { return allgatherv(comm, v); }, "counts has 1 entries");
    AllreduceOptions streamed;
    streamed.stream = &value;  // any non-null stream on host memory
    streamed.input = streamed.output = &value;
    streamed.count = 1;
    streamed.dtype = DType::i32;
    expect_refused([&] { return allreduce(comm, streamed); }, "a stream orders device operations only");
    EXPECT_EQ(counters.of(Counters::made, comm), 0) << "a refused call made the device backend";
    EXPECT_EQ(allreduce_on(comm, Memory::device, {1.0f}), std::vector<float>{2.0f}) << "after the refusals";
  });
}

bool eventually_failed(const Communicator& comm) {
  const Deadline deadline = Deadline::after(std::chrono::seconds(10));
  while (!comm.failed() && !deadline.expired()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return comm.failed();
}

TEST(NcclSeam, AbortReachesTheDeviceBackendAndThroughItThePeers) {
  Counters counters;
  run_with_fake(2, counters, [&](Communicator& comm) {
    allreduce_on(comm, Memory::device, {1.0f});
    if (comm.rank() == 0) {
      comm.abort("test abort");
      EXPECT_EQ(counters.of(Counters::aborts, comm), 1);
      EXPECT_TRUE(eventually_failed(comm)) << "the engine takes the abort in on its own thread";
      return;
    }
    try {
      allreduce_on(comm, Memory::device, {1.0f});
      ADD_FAILURE() << "rank 1's device allreduce succeeded after rank 0 aborted";
    } catch (const CommError& e) {
      EXPECT_EQ(e.peer(), 0) << e.what();
    }
    EXPECT_TRUE(eventually_failed(comm)) << "the device backend's failure is the communicator's";
  });
}

TEST(NcclSeam, AnAbortedCommunicatorMakesNoDeviceBackend) {
  Counters counters;
  run_with_fake(1, counters, [&](Communicator& comm) {
    comm.abort("before any device work");
    try {
      allreduce_on(comm, Memory::device, {1.0f});
      ADD_FAILURE() << "a device operation ran on an aborted communicator";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("before any device work"), std::string::npos) << e.what();
    }
    EXPECT_EQ(counters.of(Counters::made, comm), 0);
  });
}

}  // namespace
}  // namespace giant::ccl::test
