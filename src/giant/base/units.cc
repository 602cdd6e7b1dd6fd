#include "giant/base/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "giant/base/error.h"

namespace giant {
namespace {

// Bad text is the user's input, not a broken invariant: the message alone,
// without the condition and source line GIANT_CHECK adds.
void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Splits "12.5 MiB" into 12.5 and "mib"; throws when there is no number.
double split_number(const std::string& text, std::string* suffix, const char* what) {
  const char* begin = text.c_str();
  char* end = nullptr;
  double value = std::strtod(begin, &end);
  require(end != begin && std::isfinite(value), std::string("expected ") + what + ", got '" + text + "'");
  std::string rest(end);
  size_t first = rest.find_first_not_of(' ');
  *suffix = first == std::string::npos ? "" : lower(rest.substr(first));
  return value;
}

}  // namespace

int64_t parse_bytes(const std::string& text) {
  std::string unit;
  double value = split_number(text, &unit, "a byte size such as 4MiB");
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "kib" || unit == "k") scale = KiB;
  else if (unit == "mib" || unit == "m") scale = MiB;
  else if (unit == "gib" || unit == "g") scale = GiB;
  require(scale > 0, "unknown byte unit '" + unit + "' in '" + text + "' (use B, KB, MB, GB, KiB, MiB or GiB)");
  require(value >= 0, "byte size must not be negative, got '" + text + "'");
  return static_cast<int64_t>(std::llround(value * scale));
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0 || bytes == std::floor(bytes)) std::snprintf(buf, sizeof buf, "%.0f %s", bytes, units[u]);
  else std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  return buf;
}

double parse_bit_rate(const std::string& text) {
  std::string unit;
  double value = split_number(text, &unit, "a link rate such as 100mbit or 1Gbit/s");
  // "Mbit/s" and "Mbps" are "mbit"; "MB/s" (bytes) is refused, not read as bits.
  if (unit.size() > 2 && unit.compare(unit.size() - 2, 2, "/s") == 0) unit.erase(unit.size() - 2);
  else if (unit.size() >= 3 && unit.compare(unit.size() - 3, 3, "bps") == 0) unit.replace(unit.size() - 3, 3, "bit");
  double scale = 0;
  if (unit.empty() || unit == "bit") scale = 1;
  else if (unit == "kbit") scale = 1e3;
  else if (unit == "mbit") scale = 1e6;
  else if (unit == "gbit") scale = 1e9;
  require(scale > 0, "unknown rate unit '" + unit + "' in '" + text + "' (use bit, kbit, mbit or gbit, per second)");
  require(value > 0, "a link rate must be positive, got '" + text + "'");
  return value * scale;
}

std::string format_bit_rate(double bits_per_s) {
  const char* units[] = {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"};
  int u = 0;
  while (std::fabs(bits_per_s) >= 1000 && u < 4) {
    bits_per_s /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g %s", bits_per_s, units[u]);
  return buf;
}

double parse_seconds(const std::string& text) {
  std::string unit;
  double value = split_number(text, &unit, "a duration such as 30s or 500ms");
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "us") scale = 1e-6;
  else if (unit == "ns") scale = 1e-9;
  else if (unit == "m" || unit == "min") scale = 60;
  else if (unit == "h") scale = 3600;
  require(scale > 0, "unknown time unit '" + unit + "' in '" + text + "' (use ns, us, ms, s, m or h)");
  require(value >= 0, "duration must not be negative, got '" + text + "'");
  return value * scale;
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::string format_seconds(double seconds) {
  char buf[32];
  double a = std::fabs(seconds);
  if (a < 1e-3) std::snprintf(buf, sizeof buf, "%.3g us", seconds * 1e6);
  else if (a < 1) std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g s", seconds);
  return buf;
}

}  // namespace giant
