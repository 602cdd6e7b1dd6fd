// What the threads that issued operations on an engine wait on: the
// operations issued and not finished, for a hang report.
#include <algorithm>
#include <string>

#include "giant/base/units.h"
#include "giant/ccl/engine.h"

namespace giant::ccl::detail {
namespace {

bool finished(const std::weak_ptr<WorkState>& work) {
  const std::shared_ptr<WorkState> state = work.lock();
  if (!state) return true;
  std::lock_guard<std::mutex> lock(state->mutex);
  return state->done;
}

std::string seconds_since(std::chrono::steady_clock::time_point at) {
  return fixed(std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count(), 1) + " s";
}

}  // namespace

void Engine::track(Issued issued) {
  issued_.push_back(std::move(issued));
  if (issued_.size() < prune_at_) return;
  issued_.erase(std::remove_if(issued_.begin(), issued_.end(), [](const Issued& i) { return finished(i.work); }),
                issued_.end());
  prune_at_ = std::max<size_t>(64, 2 * issued_.size());
}

std::vector<std::string> Engine::describe_waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> lines;
  auto describe = [&](const Issued& i, const char* where) {
    std::string what = i.desc.describe();
    if (i.peer >= 0) what = (i.is_send ? "send to rank " : "recv from rank ") + std::to_string(i.peer) + " " + what;
    lines.push_back(what + where + ", issued " + seconds_since(i.at) + " ago");
  };
  for (const Issued& i : issued_) {
    if (!finished(i.work)) describe(i, "");
  }
  if (inline_op_) describe(*inline_op_, " on the issuing thread");
  return lines;
}

}  // namespace giant::ccl::detail
