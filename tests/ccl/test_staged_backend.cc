// The staged device backend (ranks sharing a GPU run device buffers through
// ccl's host path), with a copier of host memory standing for the device's:
// every collective's checks on "device" buffers over world sizes 1 to 5;
// inputs copied after the caller's stream, outputs copied back before the
// Work completes; receives finished in the order their messages arrive, not
// the order they were posted; a peer's abort fails the operations waiting on
// it with a CommError naming the rank.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ccl/support/collective_checks.h"
#include "ccl/support/ranks.h"
#include "giant/base/error.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/device_copier.h"
#include "giant/ccl/staged_backend.h"

namespace giant::ccl::test {
namespace {

constexpr int kMaxWorldSize = 5;

// Host memory as the "device": copies are memcpy; it counts them and
// records the stream each input copy was ordered after.
class HostCopier final : public DeviceCopier {
 public:
  struct Log {
    std::mutex mutex;
    std::vector<void*> streams;
    std::atomic<int> to_host{0}, to_device{0};
  };
  explicit HostCopier(Log& log) : log_(log) {}
  void to_host(void* host, const void* device, size_t bytes, void* stream) override {
    std::memcpy(host, device, bytes);
    ++log_.to_host;
    std::lock_guard<std::mutex> lock(log_.mutex);
    log_.streams.push_back(stream);
  }
  void to_device(void* device, const void* host, size_t bytes) override {
    std::memcpy(device, host, bytes);
    ++log_.to_device;
  }

 private:
  Log& log_;
};

DeviceBackendFactory staged_factory(HostCopier::Log& log) {
  return [&log](const DeviceBackendContext& context) {
    return std::make_unique<StagedBackend>(context, std::make_unique<HostCopier>(log));
  };
}

// Ranks as threads whose communicators' device backend is the staged one.
void run_staged(int n, HostCopier::Log& log, const std::function<void(Communicator&)>& body,
                const CommConfig& config = test_config()) {
  auto store = std::make_shared<MemoryStore>();
  run_threads(n, [&](int rank) {
    auto comm = Communicator::create(store, rank, n, config, "world", staged_factory(log));
    body(*comm);
  });
}

TEST(StagedBackend, EveryCollectiveOnDeviceBuffersOverWorldSizes1To5) {
  for (int n = 1; n <= kMaxWorldSize; ++n) {
    HostCopier::Log log;
    CollectivePlan plan;
    plan.memory = Memory::device;
    // The backend's own work is sizing and copying buffers: one dtype of
    // each element size, and the algorithms (the host's, tested elsewhere)
    // left to the host's choice.
    plan.dtypes = {DType::u8, DType::bf16, DType::f32, DType::i64};
    plan.algorithms = {Algorithm::automatic};
    plan.shared_memory_algorithms = false;
    plan.big_cases = {{DType::f32, ReduceOp::sum}};
    plan.store = std::make_shared<MemoryStore>();
    plan.store_prefix = "staged";
    run_staged(n, log, [&](Communicator& comm) {
      Findings findings;
      for (const NamedCheck& check : all_checks()) check.function(comm, plan, findings);
      BarrierOptions last;
      last.memory = Memory::device;
      run_op("final barrier", findings, [&] { return barrier(comm, last); });
      EXPECT_TRUE(findings.empty()) << "n=" << n << " rank " << comm.rank() << ":\n" << findings.text();
      EXPECT_STREQ(comm.backend(Memory::device).name(), "staged");
    });
    EXPECT_GT(log.to_host.load(), 0) << "n=" << n;
    EXPECT_GT(log.to_device.load(), 0) << "n=" << n;
  }
}

// An allreduce's input is copied after the caller's stream; its output is
// on the "device" when allreduce returns (the Work already complete).
TEST(StagedBackend, ACollectiveReturnsWithItsOutputOnTheDevice) {
  HostCopier::Log log;
  int stream_tag = 0;
  run_staged(3, log, [&](Communicator& comm) {
    std::vector<float> values{float(comm.rank()), 1.0f};
    AllreduceOptions o;
    o.memory = Memory::device;
    o.stream = &stream_tag;
    o.input = o.output = values.data();
    o.count = values.size();
    const Work work = allreduce(comm, o);
    EXPECT_TRUE(work.test());
    EXPECT_EQ(values, (std::vector<float>{3.0f, 3.0f}));
  });
  for (void* stream : log.streams) EXPECT_EQ(stream, &stream_tag);
}

// Rank 0 posts two receives; rank 1 sends the second one's message first
// and the first one's only after rank 0 has seen the second: receives
// finish as their messages arrive, or this would never end.
TEST(StagedBackend, ReceivesFinishInTheOrderTheirMessagesArrive) {
  HostCopier::Log log;
  run_staged(2, log, [&](Communicator& comm) {
    auto message = [&](void* buffer, uint32_t tag, bool sending) {
      if (sending) {
        SendOptions s;
        s.memory = Memory::device;
        s.buffer = buffer;
        s.nbytes = sizeof(int32_t);
        s.peer = 1 - comm.rank();
        s.tag = tag;
        return send(comm, s);
      }
      RecvOptions r;
      r.memory = Memory::device;
      r.buffer = buffer;
      r.nbytes = sizeof(int32_t);
      r.peer = 1 - comm.rank();
      r.tag = tag;
      return recv(comm, r);
    };
    int32_t first = -1, second = -1, ack = 0;
    if (comm.rank() == 0) {
      const Work got_first = message(&first, 1, false);
      const Work got_second = message(&second, 2, false);
      got_second.wait();
      EXPECT_EQ(second, 20);
      EXPECT_FALSE(got_first.test());  // its message waits for the acknowledgement
      message(&ack, 3, true).wait();
      got_first.wait();
      EXPECT_EQ(first, 10);
    } else {
      int32_t ten = 10, twenty = 20;
      message(&twenty, 2, true).wait();
      message(&ack, 3, false).wait();
      message(&ten, 1, true).wait();
    }
  });
}

// A rank that aborts fails its peer's staged operations, named.
TEST(StagedBackend, APeersAbortFailsTheOperationNamingIt) {
  HostCopier::Log log;
  run_staged(2, log, [&](Communicator& comm) {
    BarrierOptions both;  // the device backend is made, on both ranks
    both.memory = Memory::device;
    barrier(comm, both).wait();
    if (comm.rank() == 1) {
      comm.abort("a test");
      return;
    }
    int32_t value = 0;
    RecvOptions r;
    r.memory = Memory::device;
    r.buffer = &value;
    r.nbytes = sizeof value;
    r.peer = 1;
    try {
      recv(comm, r).wait();
      ADD_FAILURE() << "the receive from an aborted peer completed";
    } catch (const CommError& e) {
      EXPECT_EQ(e.peer(), 1) << e.what();
    }
  }, test_config(std::chrono::seconds(10)));
}

}  // namespace
}  // namespace giant::ccl::test
