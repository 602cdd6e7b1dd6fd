// Wall-clock time as records state it (timer.h measures durations with the
// monotonic clock instead).
#pragma once

#include <chrono>
#include <string>

namespace giant {

using WallClock = std::chrono::system_clock;

// ISO 8601 in UTC to the millisecond: "2026-12-01T08:30:00.123Z".
std::string iso8601_utc(WallClock::time_point time);

// Seconds since the Unix epoch.
double unix_seconds(WallClock::time_point time);

}  // namespace giant
