// TcpStoreServer and TcpStore; the wire format is in tcp_store_wire.h.
//
// The server runs one thread per connection over a shared map and condition
// variable, so a blocking get() holds only its own client's thread. The
// destructor shuts every socket down, which wakes every thread, and joins them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/base/timer.h"
#include "giant/ccl/socket.h"
#include "giant/ccl/store.h"
#include "giant/ccl/store_detail.h"
#include "giant/ccl/tcp_store_wire.h"

namespace giant::ccl {
namespace {

using namespace store_wire;

// How long a client waits for an answer beyond the timeout it asked for,
// before it decides the store itself is stuck.
constexpr auto kReplyGrace = std::chrono::seconds(10);
// How often a server thread blocked in get/wait checks its client is alive.
constexpr auto kLivenessCheck = std::chrono::milliseconds(200);

std::string describe_peer(const sockaddr_in& addr) {
  char ip[INET_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(addr.sin_port));
}

// True once the other end has closed or reset the connection.
bool hung_up(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

// ---------------------------------------------------------------- server

struct TcpStoreServer::Impl {
  struct Connection {
    int fd = -1;  // closed (and set to -1) by its own thread, under connections_mutex
    std::string peer;
    std::thread thread;
    std::atomic<bool> finished{false};
  };
  enum class WaitResult { ready, timed_out, stopping, client_gone };

  std::string secret_;
  TcpStoreLimits limits_;
  net::Fd listen_fd_;
  int port_ = 0;
  net::Fd wake_read_, wake_write_;  // a byte on this pipe stops the accept loop
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;

  std::mutex connections_mutex_;
  std::list<Connection> connections_;  // a list, so that threads keep valid pointers

  std::mutex data_mutex_;
  std::condition_variable data_changed_;
  std::map<std::string, Bytes> values_;

  size_t max_request_bytes() const { return limits_.max_key_bytes + limits_.max_value_bytes + kFrameOverhead; }

  void accept_loop() {
    while (!stopping_) {
      pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        GIANT_LOG(error) << "store server: poll failed: " << net::describe_errno(errno);
        return;
      }
      if (stopping_ || (fds[1].revents & POLLIN)) return;
      sockaddr_in addr{};
      socklen_t length = sizeof addr;
      int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &length, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: back off instead of spinning on a readable socket.
          GIANT_LOG(warn) << "store server: cannot accept: " << net::describe_errno(errno);
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        continue;  // EAGAIN, or a connection reset before accept
      }
      net::set_nodelay(fd);
      admit(fd, describe_peer(addr));
    }
  }

  void admit(int fd, std::string peer) {
    std::lock_guard<std::mutex> lock(connections_mutex_);
    connections_.remove_if([](Connection& c) {
      if (!c.finished) return false;
      c.thread.join();
      return true;
    });
    if (stopping_ || connections_.size() >= limits_.max_clients) {
      if (!stopping_) {
        GIANT_LOG(warn) << "store server: refusing " << peer << ": too many clients";
      }
      ::close(fd);
      return;
    }
    Connection& connection = connections_.emplace_back();
    connection.fd = fd;
    connection.peer = std::move(peer);
    try {
      connection.thread = std::thread([this, &connection] { serve(connection); });
    } catch (const std::system_error& e) {
      GIANT_LOG(warn) << "store server: refusing " << connection.peer << ": cannot start a thread: " << e.what();
      ::close(fd);
      connections_.pop_back();
    }
  }

  void serve(Connection& connection) {
    bool authenticated = false;
    try {
      serve_handshake(connection.fd, secret_, Deadline::after(limits_.handshake_timeout));
      authenticated = true;
      while (!stopping_) {
        Bytes request = recv_frame(connection.fd, max_request_bytes(), Deadline::never());
        if (!handle(connection.fd, request)) break;
      }
    } catch (const ProtocolError& e) {
      warn_dropped(connection, e.what());
    } catch (const TimeoutError& e) {
      warn_dropped(connection, authenticated ? std::string(e.what())
                                             : "no handshake within " +
                                                   std::to_string(limits_.handshake_timeout.count()) + " ms");
    } catch (const CommError& e) {
      // A client going away is normal; say so only when debugging.
      GIANT_LOG(debug) << "store server: client " << connection.peer << " disconnected: " << e.what();
    } catch (const std::exception& e) {
      warn_dropped(connection, e.what());
    }
    std::lock_guard<std::mutex> lock(connections_mutex_);
    ::close(connection.fd);
    connection.fd = -1;
    connection.finished = true;
  }

  void warn_dropped(const Connection& connection, const std::string& why) const {
    if (stopping_) return;  // shutting down drops everyone; nothing to report
    GIANT_LOG(warn) << "store server: dropping client " << connection.peer << ": " << why;
  }

  // Serves one request; false when the connection should close.
  bool handle(int fd, const Bytes& payload) {
    Request request = parse_request(payload, limits_.max_key_bytes, limits_.max_value_bytes);
    Writer reply;
    switch (request.op) {
      case Op::set: {
        {
          std::lock_guard<std::mutex> lock(data_mutex_);
          values_[request.key] = std::move(request.value);
        }
        data_changed_.notify_all();
        reply.u8(static_cast<uint8_t>(Status::ok));
        break;
      }
      case Op::get: {
        std::vector<std::string> missing;
        WaitResult result = wait_for_keys(fd, {request.key}, request.timeout_ms, &missing);
        if (result == WaitResult::stopping || result == WaitResult::client_gone) return false;
        if (result == WaitResult::timed_out) {
          reply.u8(static_cast<uint8_t>(Status::timeout));
        } else {
          std::lock_guard<std::mutex> lock(data_mutex_);
          const Bytes& value = values_.at(request.key);
          reply.u8(static_cast<uint8_t>(Status::ok)).raw(value.data(), value.size());
        }
        break;
      }
      case Op::add: {
        try {
          int64_t result = 0;
          {
            std::lock_guard<std::mutex> lock(data_mutex_);
            auto it = values_.find(request.key);
            result = detail::add_to_decimal(request.key, it == values_.end() ? nullptr : &it->second, request.delta);
            values_[request.key] = detail::decimal_bytes(result);
          }
          data_changed_.notify_all();
          reply.u8(static_cast<uint8_t>(Status::ok)).i64(result);
        } catch (const Error& e) {
          reply.u8(static_cast<uint8_t>(Status::error)).str(e.what());
        }
        break;
      }
      case Op::wait: {
        std::vector<std::string> missing;
        WaitResult result = wait_for_keys(fd, request.keys, request.timeout_ms, &missing);
        if (result == WaitResult::stopping || result == WaitResult::client_gone) return false;
        if (result == WaitResult::timed_out) {
          reply.u8(static_cast<uint8_t>(Status::timeout)).u32(static_cast<uint32_t>(missing.size()));
          for (const auto& k : missing) reply.str(k);
        } else {
          reply.u8(static_cast<uint8_t>(Status::ok));
        }
        break;
      }
    }
    send_frame(fd, reply, Deadline::never());  // the destructor's shutdown() wakes a stuck send
    return true;
  }

  // Blocks until every key exists, the timeout passes, the server stops or
  // the client hangs up (checked every kLivenessCheck, so an abandoned wait
  // does not pin its thread).
  WaitResult wait_for_keys(int fd, const std::vector<std::string>& keys, int64_t timeout_ms,
                           std::vector<std::string>* missing) {
    Deadline deadline = Deadline::after(std::chrono::milliseconds(timeout_ms));
    std::unique_lock<std::mutex> lock(data_mutex_);
    while (true) {
      if (stopping_) return WaitResult::stopping;
      missing->clear();
      for (const auto& k : keys) {
        if (values_.count(k) == 0) missing->push_back(k);
      }
      if (missing->empty()) return WaitResult::ready;
      if (deadline.expired()) return WaitResult::timed_out;
      auto slice = std::chrono::milliseconds(deadline.remaining_ms(static_cast<int>(kLivenessCheck.count())));
      data_changed_.wait_for(lock, slice);
      lock.unlock();
      bool gone = hung_up(fd);
      lock.lock();
      if (gone) return WaitResult::client_gone;
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(data_mutex_);
      stopping_ = true;
    }
    data_changed_.notify_all();
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_write_.get(), &byte, 1);
    if (accept_thread_.joinable()) accept_thread_.join();
    {
      // Wakes every thread blocked on its socket; each closes its own fd.
      std::lock_guard<std::mutex> lock(connections_mutex_);
      for (auto& c : connections_) {
        if (c.fd >= 0) ::shutdown(c.fd, SHUT_RDWR);
      }
    }
    // The accept loop has ended, so the list no longer changes shape.
    for (auto& c : connections_) c.thread.join();
    connections_.clear();
  }
};

TcpStoreServer::TcpStoreServer(const std::string& bind_address, int port, std::string secret,
                               TcpStoreLimits limits)
    : impl_(std::make_unique<Impl>()) {
  if (secret.empty()) {
    throw Error("TcpStoreServer needs a non-empty secret (clients prove they know it); set GIANT_SECRET");
  }
  GIANT_CHECK(limits.max_clients > 0 && limits.max_key_bytes > 0 && limits.handshake_timeout.count() > 0,
              "TcpStoreLimits need room for a client, a key and a handshake");
  GIANT_CHECK(limits.max_key_bytes + limits.max_value_bytes + kFrameOverhead <= UINT32_MAX,
              "TcpStoreLimits exceed what a u32 frame length can carry");
  impl_->secret_ = std::move(secret);
  impl_->limits_ = limits;
  impl_->listen_fd_ = net::listen_tcp(bind_address, port, &impl_->port_);
  net::set_nonblocking(impl_->listen_fd_.get(), true);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw CommError(-1, "store server: pipe2 failed: " + net::describe_errno(errno));
  }
  impl_->wake_read_ = net::Fd(pipe_fds[0]);
  impl_->wake_write_ = net::Fd(pipe_fds[1]);
  impl_->accept_thread_ = std::thread([impl = impl_.get()] { impl->accept_loop(); });
  GIANT_LOG(debug) << "store server listening on " << bind_address << ":" << impl_->port_;
}

TcpStoreServer::~TcpStoreServer() { impl_->stop(); }

int TcpStoreServer::port() const { return impl_->port_; }

// ---------------------------------------------------------------- client

struct TcpStore::Impl {
  std::string where;  // "host:port", for messages
  TcpStoreLimits limits;
  std::chrono::milliseconds request_timeout;
  std::mutex mutex;  // one request/response at a time
  net::Fd fd;
  std::string local_ip;
  std::string broken;  // why the connection can no longer be used ("" while healthy)

  size_t max_reply_bytes() const { return limits.max_value_bytes + kFrameOverhead; }

  // Sends a request and returns the reply's payload. A fault breaks the
  // connection for good: a half-read reply would desynchronise the stream.
  Bytes call(Writer& request, const Deadline& reply_deadline, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!broken.empty()) throw CommError(-1, "lost connection to the store at " + where + ": " + broken);
    try {
      send_frame(fd.get(), request, Deadline::after(request_timeout).earlier(reply_deadline));
      return recv_frame(fd.get(), max_reply_bytes(), reply_deadline);
    } catch (const TimeoutError& e) {
      broken = std::string("no reply to an earlier request (") + e.what() + ")";
      ::shutdown(fd.get(), SHUT_RDWR);
      throw TimeoutError(-1, "the store at " + where + " did not answer " + what + " in time: " + e.what());
    } catch (const ProtocolError& e) {
      broken = e.what();
      ::shutdown(fd.get(), SHUT_RDWR);
      throw CommError(-1, "lost connection to the store at " + where + ": its reply " + e.what());
    } catch (const CommError& e) {
      broken = e.what();
      throw CommError(-1, "lost connection to the store at " + where + ": " + e.what());
    }
  }

  // A reply deadline for a request that may block for timeout on the server.
  static Deadline reply_deadline(std::chrono::milliseconds timeout) {
    return timeout.count() <= 0 ? Deadline::never() : Deadline::after(timeout + kReplyGrace);
  }

  void check_key(const std::string& key) const {
    GIANT_CHECK(key.size() <= limits.max_key_bytes, "store key of ", key.size(), " bytes exceeds the limit of ",
                limits.max_key_bytes);
  }

  // Sends a request of `op` and reads its reply; a reply the server never
  // sends breaks the connection for good.
  Reply reply_to(Op op, Writer& request, const Deadline& deadline, const std::string& what) {
    Bytes payload = call(request, deadline, what);
    try {
      return parse_reply(op, payload, limits.max_key_bytes, limits.max_value_bytes);
    } catch (const ProtocolError& e) {
      std::lock_guard<std::mutex> lock(mutex);
      broken = "malformed reply";
      ::shutdown(fd.get(), SHUT_RDWR);
      throw CommError(-1, "lost connection to the store at " + where + ": malformed reply to " + what + " (" +
                              e.what() + ")");
    }
  }
};

TcpStore::TcpStore(const std::string& host, int port, const std::string& secret,
                   std::chrono::milliseconds connect_timeout)
    : impl_(std::make_unique<Impl>()) {
  if (secret.empty()) {
    throw Error("TcpStore needs a non-empty secret to authenticate with the store at " + host + ":" +
                std::to_string(port) + "; set GIANT_SECRET or GIANT_SECRET_FILE");
  }
  impl_->where = host + ":" + std::to_string(port);
  impl_->request_timeout = connect_timeout;
  Deadline deadline = Deadline::after(connect_timeout);
  impl_->fd = net::connect_tcp(host, port, deadline);
  try {
    client_handshake(impl_->fd.get(), secret, impl_->where,
                     deadline.earlier(Deadline::after(impl_->limits.handshake_timeout)));
  } catch (const TimeoutError& e) {
    throw TimeoutError(-1, "timed out authenticating with the store at " + impl_->where + ": " + e.what());
  } catch (const ProtocolError& e) {
    throw Error("the server at " + impl_->where + " is not a Giant store: " + e.what());
  } catch (const CommError& e) {
    throw CommError(-1, "lost connection to the store at " + impl_->where + " during the handshake: " + e.what());
  }
  impl_->local_ip = net::local_ip(impl_->fd.get());
}

TcpStore::~TcpStore() = default;

void TcpStore::set(const std::string& key, const Bytes& value) {
  impl_->check_key(key);
  GIANT_CHECK(value.size() <= impl_->limits.max_value_bytes, "store value of ", value.size(),
              " bytes for key '", key, "' exceeds the limit of ", impl_->limits.max_value_bytes);
  Writer request;
  request.u8(static_cast<uint8_t>(Op::set)).str(key).raw(value.data(), value.size());
  impl_->reply_to(Op::set, request, Deadline::after(impl_->request_timeout), "set('" + key + "')");
}

Bytes TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  impl_->check_key(key);
  Writer request;
  request.u8(static_cast<uint8_t>(Op::get)).i64(timeout.count()).str(key);
  Reply reply = impl_->reply_to(Op::get, request, Impl::reply_deadline(timeout), "get('" + key + "')");
  if (reply.status == Status::timeout) {
    throw TimeoutError(-1, "timed out after " + std::to_string(timeout.count()) + " ms waiting for store key '" +
                               key + "' at " + impl_->where);
  }
  return std::move(reply.value);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  impl_->check_key(key);
  Writer request;
  request.u8(static_cast<uint8_t>(Op::add)).i64(delta).str(key);
  Reply reply = impl_->reply_to(Op::add, request, Deadline::after(impl_->request_timeout), "add('" + key + "')");
  // The server may refuse the update (e.g. the value is not an integer).
  if (reply.status == Status::error) throw Error(reply.message);
  return reply.number;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Writer request;
  request.u8(static_cast<uint8_t>(Op::wait)).i64(timeout.count()).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys) {
    impl_->check_key(key);
    request.str(key);
  }
  Reply reply =
      impl_->reply_to(Op::wait, request, Impl::reply_deadline(timeout), "wait(" + detail::describe_keys(keys) + ")");
  if (reply.status == Status::ok) return;
  throw TimeoutError(-1, "timed out after " + std::to_string(timeout.count()) + " ms waiting for store key(s) " +
                             detail::describe_keys(reply.missing) + " at " + impl_->where);
}

std::string TcpStore::local_address() const { return impl_->local_ip; }

}  // namespace giant::ccl
