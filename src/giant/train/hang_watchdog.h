// train.hang_timeout: a rank whose step makes no progress for that long
// reports where it is and exits with status 1, so that a `giant launch
// --max-restarts` run starts again instead of waiting. Progress is a phase
// of a step beginning (step_phases.h); the report gives the phase and step
// the rank last began, and every operation it waits on in each of its
// communicators (ccl's own record: kind, peer, tag, bytes, how long ago it
// was issued). ccl's blocking waits stay bounded by ccl.timeout: this
// catches, sooner, a rank that waits on peers that are alive, or that
// computes forever.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "giant/train/step_phases.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::train {

// The automatic timeout (train.hang_timeout = 0): this many times the
// slowest step so far, and never under the floor (a first step, an
// evaluation or a checkpoint write may take much longer than a step).
inline constexpr double kHangStepMultiple = 10;
inline constexpr double kHangFloorSeconds = 300;

// The timeout in force: `setting` when positive, else the automatic one.
double hang_timeout_seconds(double setting, double slowest_step_s);

// Communicators by the name the report gives them.
using NamedCommunicators = std::vector<std::pair<std::string, const ccl::Communicator*>>;

// The report: "rank R made no progress for S s (...): it began the PHASE of
// step N S s ago; waiting in ccl on: ..." (one line per operation).
std::string hang_report(int rank, double timeout_s, const StepPhases::Last& last,
                        const NamedCommunicators& communicators);

class HangWatchdog {
 public:
  // What happens when the timeout passes: by default the report on stderr,
  // then exit status 1 (tests pass their own).
  using OnHang = std::function<void(const std::string& report)>;

  // Watches `phases` from a thread of its own until destroyed; the
  // communicators must outlive it.
  HangWatchdog(double setting, const StepPhases& phases, NamedCommunicators communicators, int rank,
               OnHang on_hang = {});
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // A step took this long (the automatic timeout follows the slowest).
  void step_took(double seconds);
  double timeout_s() const;

 private:
  void watch();

  const double setting_;
  const StepPhases& phases_;
  const NamedCommunicators communicators_;
  const int rank_;
  const OnHang on_hang_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  double slowest_step_s_ = 0;
  std::thread thread_;
};

}  // namespace giant::train
