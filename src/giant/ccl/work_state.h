// Shared completion state behind a Work handle (internal).
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>

namespace giant::ccl::detail {

struct WorkState {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  // Marks the operation finished (once; later calls are ignored).
  void finish(std::exception_ptr err);
};

}  // namespace giant::ccl::detail
