#include "giant/ccl/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "giant/base/error.h"

namespace giant::ccl::net {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string describe_errno(int err) { return std::strerror(err); }

namespace {

sockaddr_in resolve(const std::string& host, int port) {
  GIANT_CHECK(port >= 0 && port < 65536, "port out of range: ", port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string h = host.empty() ? "0.0.0.0" : host;
  if (::inet_pton(AF_INET, h.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(h.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) throw CommError(-1, "cannot resolve host '" + h + "': " + gai_strerror(rc));
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return addr;
}

// Waits for events on fd until the deadline; false on timeout.
bool wait_for(int fd, short events, const Deadline& deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.remaining_ms(1000));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) throw CommError(-1, "poll failed: " + describe_errno(errno));
    if (deadline.expired()) return false;
  }
}

}  // namespace

Fd listen_tcp(const std::string& address, int port, int* bound_port) {
  sockaddr_in addr = resolve(address, port);
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw CommError(-1, "socket() failed: " + describe_errno(errno));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw CommError(-1, "cannot listen on " + address + ":" + std::to_string(port) + ": " +
                            describe_errno(errno));
  }
  if (::listen(fd.get(), 4096) != 0) throw CommError(-1, "listen() failed: " + describe_errno(errno));
  if (bound_port != nullptr) {
    socklen_t len = sizeof addr;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    *bound_port = ntohs(addr.sin_port);
  }
  return fd;
}

Fd connect_tcp(const std::string& host, int port, const Deadline& deadline) {
  sockaddr_in addr = resolve(host, port);
  int delay_ms = 10;
  std::string last_error = "no attempt";
  while (true) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw CommError(-1, "socket() failed: " + describe_errno(errno));
    set_nonblocking(fd.get(), true);
    int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      if (!wait_for(fd.get(), POLLOUT, deadline)) break;
      socklen_t len = sizeof err;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      set_nonblocking(fd.get(), false);
      set_nodelay(fd.get());
      return fd;
    }
    last_error = describe_errno(err);
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != ECONNRESET && err != EHOSTUNREACH &&
        err != ENETUNREACH) {
      throw CommError(-1, "cannot connect to " + host + ":" + std::to_string(port) + ": " + last_error);
    }
    if (deadline.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(delay_ms, deadline.remaining_ms(delay_ms))));
    delay_ms = std::min(delay_ms * 2, 500);
  }
  throw TimeoutError(-1, "timed out connecting to " + host + ":" + std::to_string(port) + " (" +
                             last_error + ")");
}

Fd accept_tcp(int listen_fd, const Deadline& deadline) {
  while (true) {
    if (!wait_for(listen_fd, POLLIN, deadline)) throw TimeoutError(-1, "timed out waiting for a connection");
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      return Fd(fd);
    }
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
      throw CommError(-1, "accept() failed: " + describe_errno(errno));
    }
  }
}

void set_nonblocking(int fd, bool nonblocking) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  flags = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  ::fcntl(fd, F_SETFL, flags);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_buffer_sizes(int fd, int bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void send_all(int fd, const void* data, size_t nbytes, const Deadline& deadline) {
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    ssize_t n = ::send(fd, p, nbytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      nbytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLOUT, deadline)) throw TimeoutError(-1, "timed out sending");
      continue;
    }
    throw CommError(-1, "send failed: " + describe_errno(errno));
  }
}

void recv_all(int fd, void* data, size_t nbytes, const Deadline& deadline) {
  char* p = static_cast<char*>(data);
  while (nbytes > 0) {
    ssize_t n = ::recv(fd, p, nbytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      nbytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) throw CommError(-1, "connection closed by the other side");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, deadline)) throw TimeoutError(-1, "timed out receiving");
      continue;
    }
    throw CommError(-1, "recv failed: " + describe_errno(errno));
  }
}

std::string local_ip(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char buf[INET_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof buf);
  return buf;
}

}  // namespace giant::ccl::net
