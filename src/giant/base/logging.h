// Line-atomic logging to stderr with a rank prefix.
//
//   GIANT_LOG(info) << "connected to " << n << " peers";
//
// The prefix ("[rank 3] ") and the level are the process's one logging
// setting, configured once at start-up (by bootstrap or the launcher);
// everything else reads it.
#pragma once

#include <sstream>
#include <string>

namespace giant {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

LogLevel parse_log_level(const std::string& name);  // throws giant::Error
void configure_logging(const std::string& prefix, LogLevel level);
LogLevel log_level();
bool log_enabled(LogLevel level);

namespace detail {
class LogLine {
 public:
  explicit LogLine(LogLevel level) : level_(level) {}
  ~LogLine();
  template <class T>
  LogLine& operator<<(const T& value) {
    out_ << value;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream out_;
};
}  // namespace detail
}  // namespace giant

#define GIANT_LOG(level)                                        \
  if (!::giant::log_enabled(::giant::LogLevel::level)) {        \
  } else                                                        \
    ::giant::detail::LogLine(::giant::LogLevel::level)
