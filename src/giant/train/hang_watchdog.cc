#include "giant/train/hang_watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "giant/base/units.h"
#include "giant/ccl/communicator.h"

namespace giant::train {
namespace {

std::string seconds(double s) { return fixed(s, 1) + " s"; }

void report_and_exit(const std::string& report) {
  std::cerr << report << std::flush;
  std::_Exit(1);  // other threads are stuck in waits: no destructor may run
}

}  // namespace

double hang_timeout_seconds(double setting, double slowest_step_s) {
  if (setting > 0) return setting;
  return std::max(kHangFloorSeconds, kHangStepMultiple * slowest_step_s);
}

std::string hang_report(int rank, double timeout_s, const StepPhases::Last& last,
                        const NamedCommunicators& communicators) {
  std::string text = "giant train: rank " + std::to_string(rank) + " made no progress for " +
                     seconds(last.seconds_ago) + " (train.hang_timeout: " + seconds(timeout_s) + "): ";
  text += last.any ? "it began the " + std::string(phase_name(last.phase)) + " of step " +
                         std::to_string(last.step) + " " + seconds(last.seconds_ago) + " ago"
                   : "no step has begun";
  std::string waits;
  for (const auto& [name, comm] : communicators) {
    for (const std::string& op : comm->waiting_operations()) {
      waits += "\n  " + name + " (" + std::to_string(comm->size()) + " ranks, rank " + std::to_string(comm->rank()) +
               " here): " + op;
    }
  }
  text += waits.empty() ? "; it waits on no ccl operation (it computes, or waits elsewhere)\n"
                        : "; it waits in ccl on:" + waits + "\n";
  return text + "giant train: rank " + std::to_string(rank) + " exits with status 1 (a restart may follow)\n";
}

HangWatchdog::HangWatchdog(double setting, const StepPhases& phases, NamedCommunicators communicators, int rank,
                           OnHang on_hang)
    : setting_(setting),
      phases_(phases),
      communicators_(std::move(communicators)),
      rank_(rank),
      on_hang_(on_hang ? std::move(on_hang) : OnHang(report_and_exit)),
      thread_([this] { watch(); }) {}

HangWatchdog::~HangWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void HangWatchdog::step_took(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  slowest_step_s_ = std::max(slowest_step_s_, seconds);
}

double HangWatchdog::timeout_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hang_timeout_seconds(setting_, slowest_step_s_);
}

void HangWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Looks often enough that a hang is reported within a tenth of the timeout.
  const auto period = std::chrono::duration<double>(std::clamp(setting_ > 0 ? setting_ / 10 : 1.0, 0.05, 1.0));
  while (!wake_.wait_for(lock, period, [&] { return stopping_; })) {
    const StepPhases::Last last = phases_.last();
    const double timeout = hang_timeout_seconds(setting_, slowest_step_s_);
    if (!last.any || last.seconds_ago < timeout) continue;
    lock.unlock();
    on_hang_(hang_report(rank_, timeout, last, communicators_));
    return;  // once
  }
}

}  // namespace giant::train
