#include "giant/ccl/work.h"

#include "giant/base/error.h"
#include "giant/ccl/work_state.h"

namespace giant::ccl {

bool Work::test() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

void Work::wait(std::chrono::milliseconds timeout) const {
  if (!state_) return;
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (timeout.count() > 0) {
    if (!state_->cv.wait_for(lock, timeout, [&] { return state_->done; })) {
      throw TimeoutError(-1, "Work::wait gave up after " + std::to_string(timeout.count()) +
                                 " ms; the operation is still running");
    }
  } else {
    state_->cv.wait(lock, [&] { return state_->done; });
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

std::exception_ptr Work::error() const {
  if (!state_) return nullptr;
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->error;
}

namespace detail {

void WorkState::finish(std::exception_ptr err) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (done) return;
    done = true;
    error = std::move(err);
  }
  cv.notify_all();
}

}  // namespace detail
}  // namespace giant::ccl
