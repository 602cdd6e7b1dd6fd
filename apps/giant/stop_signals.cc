#include "stop_signals.h"

#include <signal.h>

#include <atomic>

#include "giant/base/error.h"

namespace giant::app {
namespace {

constexpr int kCaught[] = {SIGINT, SIGTERM};
// A handler has only globals to reach; it is the one writer.
std::atomic<int> first_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
struct sigaction saved[2];
bool installed[2] = {};

void on_signal(int signo) {
  int none = 0;
  if (first_signal.compare_exchange_strong(none, signo)) return;
  // The second: no more waiting. Die by it, as if nothing had caught it.
  ::signal(signo, SIG_DFL);
  ::raise(signo);
}

}  // namespace

StopSignals::StopSignals() {
  first_signal = 0;
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int i = 0; i < 2; ++i) {
    GIANT_CHECK(::sigaction(kCaught[i], nullptr, &saved[i]) == 0, "sigaction to read a disposition");
    if (saved[i].sa_handler == SIG_IGN) continue;
    GIANT_CHECK(::sigaction(kCaught[i], &action, nullptr) == 0, "sigaction to install a handler");
    installed[i] = true;
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 2; ++i) {
    if (installed[i]) ::sigaction(kCaught[i], &saved[i], nullptr);
    installed[i] = false;
  }
}

int StopSignals::received() { return first_signal.load(); }

}  // namespace giant::app
