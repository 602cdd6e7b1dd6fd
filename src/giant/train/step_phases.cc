#include "giant/train/step_phases.h"

#include <chrono>

namespace giant::train {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int64_t kPhases = 8;

}  // namespace

void StepPhases::mark(FaultPhase phase, int64_t step) {
  begun_ns_.store(now_ns(), std::memory_order_relaxed);
  phase_and_step_.store(step * kPhases + static_cast<int64_t>(phase), std::memory_order_release);
}

StepPhases::Last StepPhases::last() const {
  const int64_t packed = phase_and_step_.load(std::memory_order_acquire);
  if (packed < 0) return {};
  Last last;
  last.any = true;
  last.phase = static_cast<FaultPhase>(packed % kPhases);
  last.step = packed / kPhases;
  last.seconds_ago = static_cast<double>(now_ns() - begun_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return last;
}

}  // namespace giant::train
