// Monotonic time: a stopwatch for measuring and a deadline for bounding waits.
#pragma once

#include <algorithm>
#include <chrono>

namespace giant {

using Clock = std::chrono::steady_clock;

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void reset() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  Clock::time_point start_;
};

// A point in time after which a wait gives up. A zero or negative duration
// means "never".
class Deadline {
 public:
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  // Already expired: waits bounded by it do not block.
  static Deadline passed() { return Deadline(Clock::now() - std::chrono::seconds(1)); }
  // A duration past what the clock can count (a timeout a peer sent, say)
  // is no deadline, never an overflow.
  template <class Rep, class Period>
  static Deadline after(std::chrono::duration<Rep, Period> d) {
    if (!(d.count() > 0)) return never();
    const Clock::time_point now = Clock::now();
    if (d >= std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(Clock::time_point::max() - now)) {
      return never();
    }
    return Deadline(now + std::chrono::duration_cast<Clock::duration>(d));
  }
  static Deadline after_seconds(double s) { return after(std::chrono::duration<double>(s)); }

  bool is_never() const { return at_ == Clock::time_point::max(); }
  bool expired() const { return !is_never() && Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  // Milliseconds left, clamped to [0, cap_ms]; cap_ms when there is no deadline.
  int remaining_ms(int cap_ms) const {
    if (is_never()) return cap_ms;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left + 1, 0, cap_ms));
  }
  Deadline earlier(const Deadline& other) const { return at_ <= other.at_ ? *this : other; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

}  // namespace giant
