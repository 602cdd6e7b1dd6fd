// MemoryStore: a map guarded by a mutex, with a condition variable that wakes
// every blocked get()/wait() whenever a key is written.
#include <condition_variable>
#include <map>
#include <mutex>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/store.h"
#include "giant/ccl/store_detail.h"

namespace giant::ccl {

struct MemoryStore::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, Bytes> values;

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& k : keys) {
      if (values.count(k) == 0) out.push_back(k);
    }
    return out;
  }

  // Blocks (lock held on entry and exit) until every key exists; a zero or
  // negative timeout waits forever, like Deadline::after.
  void wait_for_keys(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                     std::chrono::milliseconds timeout) {
    Deadline deadline = Deadline::after(timeout);
    auto all_present = [&] { return missing(keys).empty(); };
    if (deadline.is_never()) {
      changed.wait(lock, all_present);
      return;
    }
    if (!changed.wait_until(lock, deadline.at(), all_present)) {
      throw TimeoutError(-1, "timed out after " + std::to_string(timeout.count()) +
                                 " ms waiting for store key(s) " + detail::describe_keys(missing(keys)));
    }
  }
};

MemoryStore::MemoryStore() : state_(std::make_unique<State>()) {}

MemoryStore::~MemoryStore() = default;

void MemoryStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->values[key] = value;
  }
  state_->changed.notify_all();
}

Bytes MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->wait_for_keys(lock, {key}, timeout);
  return state_->values.at(key);
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->values.find(key);
    result = detail::add_to_decimal(key, it == state_->values.end() ? nullptr : &it->second, delta);
    state_->values[key] = detail::decimal_bytes(result);
  }
  state_->changed.notify_all();
  return result;
}

void MemoryStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->wait_for_keys(lock, keys, timeout);
}

}  // namespace giant::ccl
