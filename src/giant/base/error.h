// Error taxonomy, one exception type per kind of failure:
//  - giant::Error: a caller mistake or a broken invariant, thrown by GIANT_CHECK.
//  - giant::ConfigError: bad configuration, naming the key.
//  - giant::CommError: a communication fault; the communicator that raised it
//    is broken and must be rebuilt. Names the peer rank that caused it.
//  - giant::TimeoutError: a CommError raised when a whole operation (or a
//    store wait) did not finish in time.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace giant {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

class ConfigError : public Error {
 public:
  ConfigError(std::string key, const std::string& what)
      : Error(key.empty() ? what : "'" + key + "': " + what), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// A file that is not what it should be (truncated, corrupt, another
// model's or another format's): the message names the file and what is wrong.
class FormatError : public Error {
 public:
  using Error::Error;
};

class CommError : public Error {
 public:
  // peer: the rank held responsible (-1 when unknown, e.g. the store).
  CommError(int peer, const std::string& what) : Error(what), peer_(peer) {}
  int peer() const { return peer_; }

 private:
  int peer_;
};

class TimeoutError : public CommError {
 public:
  TimeoutError(int peer, const std::string& what) : CommError(peer, what) {}
};

namespace detail {

template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

[[noreturn]] void check_failed(const char* condition, const char* file, int line,
                               const std::string& message);

}  // namespace detail
}  // namespace giant

// GIANT_CHECK(cond, "expected ", a, ", got ", b): throws giant::Error naming
// the condition and where it failed.
#define GIANT_CHECK(cond, ...)                                                  \
  do {                                                                          \
    if (!(cond)) {                                                              \
      ::giant::detail::check_failed(#cond, __FILE__, __LINE__,                  \
                                    ::giant::detail::concat(__VA_ARGS__));      \
    }                                                                           \
  } while (0)
