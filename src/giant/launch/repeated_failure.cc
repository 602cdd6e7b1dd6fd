#include "giant/launch/repeated_failure.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "giant/base/error.h"

namespace giant::launch {
namespace {

// The step in the file; -1 when it holds none (no step began).
long long read_step(const std::string& path) {
  std::ifstream in(path);
  long long step = -1;
  if (!(in >> step)) return -1;
  return step;
}

// The failure without the rank it names first: when every rank meets the
// cause (a full disk), which of them the launcher sees fail first varies.
std::string way_of(const std::string& failure) {
  const std::string prefix = "rank ";
  if (failure.compare(0, prefix.size(), prefix) != 0) return failure;
  size_t end = prefix.size();
  while (end < failure.size() && failure[end] >= '0' && failure[end] <= '9') ++end;
  return end > prefix.size() ? failure.substr(end) : failure;
}

}  // namespace

RepeatedFailure::RepeatedFailure(const std::string& temp_dir) {
  std::string pattern = temp_dir + "/giant-launch-step-XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw Error("cannot make the step file in " + temp_dir + " (TMPDIR)");
  ::close(fd);
  step_file_ = pattern;
}

RepeatedFailure::~RepeatedFailure() { ::unlink(step_file_.c_str()); }

bool RepeatedFailure::repeats(const std::string& failure) {
  const long long step = read_step(step_file_);
  std::ofstream(step_file_, std::ios::trunc);  // the next attempt starts with none
  // Only past start-up: a failure before any step (a port taken, a slow
  // peer) may well pass.
  const bool same = step >= 0 && last_failure_ && *last_failure_ == way_of(failure) && last_step_ == step;
  last_failure_ = way_of(failure);
  last_step_ = step;
  return same;
}

std::string RepeatedFailure::where() const {
  return last_step_ < 0 ? "start-up" : "step " + std::to_string(last_step_);
}

}  // namespace giant::launch
