// Thin, deadline-bounded helpers over TCP sockets, shared by the store and
// the tcp transport. Errors are CommErrors with peer -1 (callers that know
// the peer rethrow with it) and TimeoutErrors when a deadline passes.
#pragma once

#include <cstddef>
#include <string>

#include "giant/base/timer.h"

namespace giant::ccl::net {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Listens on address:port (port 0 picks one); *bound_port gets the port.
Fd listen_tcp(const std::string& address, int port, int* bound_port);
// Connects, retrying refused connections until the deadline.
Fd connect_tcp(const std::string& host, int port, const Deadline& deadline);
// Accepts one connection, or throws TimeoutError at the deadline.
Fd accept_tcp(int listen_fd, const Deadline& deadline);

void set_nonblocking(int fd, bool nonblocking);
void set_nodelay(int fd);
void set_buffer_sizes(int fd, int bytes);

// Blocking-style transfers on a socket of either mode, bounded by a deadline.
void send_all(int fd, const void* data, size_t nbytes, const Deadline& deadline);
void recv_all(int fd, void* data, size_t nbytes, const Deadline& deadline);

std::string local_ip(int fd);  // IP of this end of a connected socket
std::string describe_errno(int err);

}  // namespace giant::ccl::net
