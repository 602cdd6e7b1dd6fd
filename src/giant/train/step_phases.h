// The phases of a step as they begin, seen from two sides: train.fault fires
// at them (fault_injection.h), and the hang watchdog reads from its own
// thread which phase of which step the rank last began, and when.
#pragma once

#include <atomic>
#include <cstdint>

#include "giant/train/fault_injection.h"

namespace giant::train {

class StepPhases {
 public:
  StepPhases() = default;
  StepPhases(const StepPhases&) = delete;
  StepPhases& operator=(const StepPhases&) = delete;

  // Called by the training thread as phase `phase` of step `step` (1-based)
  // begins: records it, then lets train.fault fire there.
  void begin(FaultPhase phase, int64_t step) {
    mark(phase, step);
    faults_.at(phase, step);
  }
  // Records the phase only (a checkpoint's fault fires in the middle of its
  // write: faults()).
  void mark(FaultPhase phase, int64_t step);

  struct Last {
    bool any = false;  // false: no phase has begun yet
    FaultPhase phase = FaultPhase::forward;
    int64_t step = 0;
    double seconds_ago = 0;
  };
  // The phase begun last; callable from any thread.
  Last last() const;

  // train.fault's injector (off until armed).
  void arm(const FaultInjector& faults) { faults_ = faults; }
  const FaultInjector& faults() const { return faults_; }

 private:
  FaultInjector faults_;
  std::atomic<int64_t> phase_and_step_{-1};  // step x 8 + phase
  std::atomic<int64_t> begun_ns_{0};         // steady clock
};

}  // namespace giant::train
