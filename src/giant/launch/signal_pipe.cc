#include "giant/launch/signal_pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "giant/base/error.h"

namespace giant::launch {
namespace {

// The one piece of global state: a handler can reach nothing else.
std::atomic<int> g_signal_write_fd{-1};

void on_signal(int signo) {
  int saved_errno = errno;
  int fd = g_signal_write_fd.load();
  if (fd >= 0) {
    unsigned char byte = static_cast<unsigned char>(signo);
    [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);  // full pipe: a wakeup is already pending
  }
  errno = saved_errno;
}

}  // namespace

SignalPipe::SignalPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(std::string("cannot create the signal pipe: ") + ::strerror(errno));
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  int expected = -1;
  if (!g_signal_write_fd.compare_exchange_strong(expected, write_fd_)) {
    ::close(read_fd_);
    ::close(write_fd_);
    throw Error("only one launch may run at a time in a process");
  }
  for (size_t i = 0; i < sizeof(kCaught) / sizeof(kCaught[0]); ++i) {
    int signo = kCaught[i];
    struct sigaction current {};
    ::sigaction(signo, nullptr, &current);
    bool ignored_on_entry = current.sa_handler == SIG_IGN;
    if (ignored_on_entry && signo != SIGCHLD && signo != SIGPIPE) continue;
    struct sigaction action {};
    ::sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    // SIGCHLD only wakes the loop; SIGPIPE is ignored so that a closed
    // reader of the ranks' output does not kill the launcher and orphan them.
    action.sa_handler = signo == SIGPIPE ? SIG_IGN : on_signal;
    if (signo == SIGCHLD) action.sa_flags |= SA_NOCLDSTOP;
    ::sigaction(signo, &action, &saved_[i]);
    installed_[i] = true;
  }
}

SignalPipe::~SignalPipe() {
  for (size_t i = 0; i < sizeof(kCaught) / sizeof(kCaught[0]); ++i) {
    if (installed_[i]) ::sigaction(kCaught[i], &saved_[i], nullptr);
  }
  g_signal_write_fd.store(-1);
  ::close(read_fd_);
  ::close(write_fd_);
}

std::vector<int> SignalPipe::take() {
  std::vector<int> signals;
  unsigned char buffer[64];
  while (true) {
    ssize_t n = ::read(read_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    signals.insert(signals.end(), buffer, buffer + n);
  }
  return signals;
}

}  // namespace giant::launch
