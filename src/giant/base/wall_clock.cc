#include "giant/base/wall_clock.h"

#include <cstdio>
#include <ctime>

namespace giant {

std::string iso8601_utc(WallClock::time_point time) {
  const auto milliseconds = std::chrono::floor<std::chrono::milliseconds>(time);
  const auto seconds = std::chrono::floor<std::chrono::seconds>(milliseconds);
  const std::time_t whole = WallClock::to_time_t(seconds);
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &utc);
  char text[48];
  std::snprintf(text, sizeof text, "%s.%03dZ", date, static_cast<int>((milliseconds - seconds).count()));
  return text;
}

double unix_seconds(WallClock::time_point time) {
  return std::chrono::duration<double>(time.time_since_epoch()).count();
}

}  // namespace giant
