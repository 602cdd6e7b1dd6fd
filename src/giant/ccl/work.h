// Handle of an asynchronous ccl operation.
#pragma once

#include <chrono>
#include <exception>
#include <memory>

namespace giant::ccl {

namespace detail {
struct WorkState;
}

class Work {
 public:
  Work() = default;  // an empty Work is already complete
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

  // True once the operation has finished, successfully or not. Never throws.
  bool test() const;
  // Blocks until the operation finishes and rethrows its error, if any.
  // With a positive timeout, gives up after it with a TimeoutError (the
  // operation itself goes on and still fails or completes on its own).
  // Without one, the wait is bounded by the operation's own timeout.
  void wait(std::chrono::milliseconds timeout = std::chrono::milliseconds::zero()) const;
  // The operation's error once finished with one, else null.
  std::exception_ptr error() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace giant::ccl
