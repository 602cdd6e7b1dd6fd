// Line-atomic logging to stderr with a rank prefix.
//
//   GIANT_LOG(info) << "connected to " << n << " peers";
//
// The prefix ("[rank 3] "), the level and whether lines start with a
// timestamp are the process's one logging setting, configured at start-up
// (the level and timestamps by the giant command from log.level and
// log.timestamps, the prefix by bootstrap); everything else reads it.
#pragma once

#include <sstream>
#include <string>

namespace giant {

class Tunables;

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

LogLevel parse_log_level(const std::string& name);  // throws giant::Error
void configure_logging(const std::string& prefix, LogLevel level);
void set_log_level(LogLevel level);
// Each line then starts with the UTC time, "2024-05-01T12:34:56.789Z ".
void set_log_timestamps(bool on);
LogLevel log_level();
bool log_enabled(LogLevel level);

// log.level (GIANT_LOG_LEVEL) and log.timestamps (GIANT_LOG_TIMESTAMPS).
void define_logging_tunables(Tunables& keys);
// Sets the level and timestamps from those keys; a bad level is a
// ConfigError naming log.level and where its value came from.
void configure_logging_from(const Tunables& keys);

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
