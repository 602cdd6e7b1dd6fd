// The hang watchdog: the automatic timeout, that marks keep it quiet, and the
// report of a rank that stops beginning phases, with what it waits on in ccl
// (ranks as threads over one MemoryStore; the exit is replaced by a capture).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "giant/base/timer.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/train/hang_watchdog.h"
#include "giant/train/step_phases.h"

namespace giant::train {
namespace {

using namespace std::chrono_literals;

// The watchdog's reports, and when the first came (seconds after started()).
class Capture {
 public:
  void started() {
    std::lock_guard<std::mutex> lock(mutex_);
    watch_.reset();
  }
  HangWatchdog::OnHang on_hang() {
    return [this](const std::string& report) {
      std::lock_guard<std::mutex> lock(mutex_);
      reports_.push_back(report);
      if (fired_at_ < 0) fired_at_ = watch_.seconds();
    };
  }
  std::vector<std::string> reports() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return reports_;
  }
  double fired_at() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return fired_at_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> reports_;
  double fired_at_ = -1;
  Stopwatch watch_;
};

TEST(HangWatchdog, TheAutomaticTimeoutFollowsTheSlowestStepAboveAFloor) {
  EXPECT_EQ(hang_timeout_seconds(2.5, 100), 2.5);  // set: as set
  EXPECT_EQ(hang_timeout_seconds(0, 0), kHangFloorSeconds);
  EXPECT_EQ(hang_timeout_seconds(0, 1), kHangFloorSeconds);
  EXPECT_EQ(hang_timeout_seconds(0, 100), kHangStepMultiple * 100);
  StepPhases phases;
  HangWatchdog watchdog(0, phases, {}, 0, [](const std::string&) {});
  watchdog.step_took(40);
  watchdog.step_took(3);
  EXPECT_EQ(watchdog.timeout_s(), kHangStepMultiple * 40);
}

TEST(HangWatchdog, PhasesThatKeepBeginningKeepItQuiet) {
  StepPhases phases;
  Capture capture;
  {
    HangWatchdog watchdog(0.3, phases, {}, 0, capture.on_hang());
    for (int step = 1; step <= 20; ++step) {  // 1 s in all, a phase every 50 ms
      phases.begin(FaultPhase::forward, step);
      std::this_thread::sleep_for(50ms);
    }
  }
  EXPECT_TRUE(capture.reports().empty());
}

TEST(HangWatchdog, NothingIsReportedBeforeTheFirstPhase) {
  StepPhases phases;
  Capture capture;
  {
    HangWatchdog watchdog(0.1, phases, {}, 0, capture.on_hang());
    std::this_thread::sleep_for(400ms);
  }
  EXPECT_TRUE(capture.reports().empty());
}

// Rank 1 stops beginning phases in its backward; rank 0 waits on it in an
// allreduce and a receive. Each rank's watchdog fires within a tenth of the
// timeout past it, once, naming the phase and step and what it waits on.
TEST(HangWatchdog, ARankThatStopsReportsItsPhaseAndItsWaits) {
  auto store = std::make_shared<ccl::MemoryStore>();
  constexpr double kTimeout = 0.5;
  std::vector<Capture> captures(2);
  std::atomic<int> reported{0};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      ccl::CommConfig config;
      config.timeout = 30s;
      auto comm = ccl::Communicator::create(store, rank, 2, config);
      StepPhases phases;
      std::vector<float> data(1024, 1.0f), message(16);
      {
        HangWatchdog watchdog(kTimeout, phases, {{"dp", comm.get()}}, rank, captures[rank].on_hang());
        phases.begin(FaultPhase::forward, 3);
        phases.begin(FaultPhase::backward, 3);
        captures[rank].started();
        if (rank == 0) {
          ccl::RecvOptions receive;
          receive.buffer = message.data();
          receive.nbytes = message.size() * sizeof(float);
          receive.peer = 1;
          receive.tag = 5;
          const ccl::Work received = ccl::recv(*comm, receive);
          ccl::AllreduceOptions reduce;
          reduce.input = reduce.output = data.data();
          reduce.count = data.size();
          const ccl::Work reduced = ccl::allreduce(*comm, reduce);
          // Both watchdogs report before rank 1 joins in.
          while (reported < 2) std::this_thread::sleep_for(10ms);
          reduced.wait();
          received.wait();
        } else {
          while (captures[1].reports().empty()) std::this_thread::sleep_for(10ms);
          ++reported;
          while (captures[0].reports().empty()) std::this_thread::sleep_for(10ms);
          ++reported;
          ccl::AllreduceOptions reduce;
          reduce.input = reduce.output = data.data();
          reduce.count = data.size();
          ccl::allreduce(*comm, reduce).wait();
          ccl::SendOptions send;
          send.buffer = message.data();
          send.nbytes = message.size() * sizeof(float);
          send.peer = 0;
          send.tag = 5;
          ccl::send(*comm, send).wait();
        }
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    const auto reports = captures[rank].reports();
    ASSERT_EQ(reports.size(), 1u) << "rank " << rank;
    const std::string& r = reports[0];
    EXPECT_NE(r.find("giant train: rank " + std::to_string(rank) + " made no progress for "), std::string::npos) << r;
    EXPECT_NE(r.find("(train.hang_timeout: 0.5 s): it began the backward of step 3 "), std::string::npos) << r;
    EXPECT_NE(r.find("exits with status 1"), std::string::npos) << r;
    EXPECT_GE(captures[rank].fired_at(), kTimeout);
    EXPECT_LE(captures[rank].fired_at(), kTimeout + 0.5) << "rank " << rank;  // a tenth, and a busy machine
  }
  const std::string waits = captures[0].reports()[0];
  EXPECT_NE(waits.find("it waits in ccl on:\n  dp (2 ranks, rank 0 here): recv from rank 1 "), std::string::npos)
      << waits;
  EXPECT_NE(waits.find("tag=5"), std::string::npos) << waits;
  EXPECT_NE(waits.find("allreduce(count=1024, dtype=f32"), std::string::npos) << waits;
  EXPECT_NE(captures[1].reports()[0].find("it waits on no ccl operation"), std::string::npos)
      << captures[1].reports()[0];
}

}  // namespace
}  // namespace giant::train
