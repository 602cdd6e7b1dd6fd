// Turns the signals the launcher acts on into bytes on a pipe (the
// self-pipe trick), so its poll loop sees them with the ranks' output and
// nothing but a write() runs in a handler.
#pragma once

#include <signal.h>

#include <vector>

namespace giant::launch {

class SignalPipe {
 public:
  // Catches SIGINT, SIGTERM and SIGHUP (each unless ignored on entry, so
  // `nohup giant launch` keeps ignoring SIGHUP) and SIGCHLD, and ignores
  // SIGPIPE. Only one may exist at a time. Throws giant::Error.
  SignalPipe();
  // Puts every disposition back as it was.
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int read_fd() const { return read_fd_; }
  // The signals received since the last call, oldest first.
  std::vector<int> take();

 private:
  static constexpr int kCaught[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction saved_[sizeof(kCaught) / sizeof(kCaught[0])];
  bool installed_[sizeof(kCaught) / sizeof(kCaught[0])] = {};
};

}  // namespace giant::launch
