#include "giant/base/logging.h"

#include <unistd.h>

#include <atomic>
#include <mutex>

#include "giant/base/error.h"
#include "giant/base/tunables.h"
#include "giant/base/wall_clock.h"

namespace giant {
namespace {

struct LogSettings {
  std::mutex mutex;
  std::string prefix;
  std::atomic<int> level{static_cast<int>(LogLevel::info)};
  std::atomic<bool> timestamps{false};
};

LogSettings& settings() {
  static LogSettings s;
  return s;
}

const char* level_tag(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "D ";
    case LogLevel::info: return "";
    case LogLevel::warn: return "warning: ";
    case LogLevel::error: return "error: ";
    default: return "";
  }
}

}  // namespace

LogLevel parse_log_level(const std::string& name) {
  if (name == "debug") return LogLevel::debug;
  if (name == "info") return LogLevel::info;
  if (name == "warn" || name == "warning") return LogLevel::warn;
  if (name == "error") return LogLevel::error;
  if (name == "off") return LogLevel::off;
  throw Error("unknown log level '" + name + "' (use debug, info, warn, error or off)");
}

void configure_logging(const std::string& prefix, LogLevel level) {
  auto& s = settings();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.prefix = prefix;
  s.level = static_cast<int>(level);
}

void set_log_level(LogLevel level) { settings().level = static_cast<int>(level); }

void set_log_timestamps(bool on) { settings().timestamps = on; }

LogLevel log_level() { return static_cast<LogLevel>(settings().level.load()); }

bool log_enabled(LogLevel level) { return static_cast<int>(level) >= settings().level.load(); }

void define_logging_tunables(Tunables& keys) {
  keys.define_string("log.level", "info", "messages shown: debug, info, warn, error or off");
  keys.define_bool("log.timestamps", false, "start each log line with the UTC time");
}

void configure_logging_from(const Tunables& keys) {
  const std::string& level = keys.get_string("log.level");
  try {
    set_log_level(parse_log_level(level));
  } catch (const Error& e) {
    throw ConfigError("log.level", std::string(e.what()) + " (from " +
                                       tunable_origin("log.level", keys.source("log.level")) + ")");
  }
  set_log_timestamps(keys.get_bool("log.timestamps"));
}

namespace detail {

LogLine::~LogLine() {
  auto& s = settings();
  std::string line = s.timestamps ? iso8601_utc(WallClock::now()) + " " : std::string();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    line += s.prefix;
  }
  line += level_tag(level_);
  line += out_.str();
  line += '\n';
  // One write per line so that lines from threads and ranks never interleave.
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

}  // namespace detail
}  // namespace giant
