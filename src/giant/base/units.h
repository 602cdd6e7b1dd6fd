// Byte sizes, link rates and durations as people write them ("4MiB", "64 MB",
// "100mbit", "500ms", "30s") and back.
#pragma once

#include <cstdint>
#include <string>

namespace giant {

constexpr int64_t KiB = 1024;
constexpr int64_t MiB = 1024 * KiB;
constexpr int64_t GiB = 1024 * MiB;

// Accepts a plain number of bytes or a number with B, KB/MB/GB (powers of
// 1000) or KiB/MiB/GiB (powers of 1024), any case, optional space.
// Throws giant::Error on anything else.
int64_t parse_bytes(const std::string& text);
// "64 MiB", "1.5 KiB", "7 B".
std::string format_bytes(double bytes);

// Link rates as tc and people write them: a plain number of bits per
// second, or with bit, kbit, mbit, gbit (also "Mbit/s", "Gbps"; powers of
// 1000, any case). Throws giant::Error on anything else or a rate <= 0.
double parse_bit_rate(const std::string& text);
// "100 Mbit/s", "2.5 Gbit/s".
std::string format_bit_rate(double bits_per_s);

// Accepts "250ms", "1.5s", "2m", "1h", "30us" or a plain number of seconds.
double parse_seconds(const std::string& text);
// "12.3 ms", "4.56 s", "850 us".
std::string format_seconds(double seconds);

// `value` with `digits` decimals (printf's "%.*f"): "3.0", "0.125".
std::string fixed(double value, int digits);

}  // namespace giant
