#include "giant/base/crc32c.h"

#include <array>
#include <cstring>

namespace giant {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78;  // Castagnoli, reflected

// The CRC of each byte value, one table lookup per byte of input.
constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

uint32_t extend_bytewise(uint32_t state, const unsigned char* data, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) state = (state >> 8) ^ kTable[(state ^ data[i]) & 0xFF];
  return state;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t extend_hardware(uint32_t state, const unsigned char* data,
                                                           size_t bytes) {
  uint64_t wide = state;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    wide = __builtin_ia32_crc32di(wide, word);
  }
  auto narrow = static_cast<uint32_t>(wide);
  for (; i < bytes; ++i) narrow = __builtin_ia32_crc32qi(narrow, data[i]);
  return narrow;
}

bool has_hardware_crc() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

uint32_t extend_state(uint32_t state, std::string_view data) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
#if defined(__x86_64__)
  if (has_hardware_crc()) return extend_hardware(state, bytes, data.size());
#endif
  return extend_bytewise(state, bytes, data.size());
}

}  // namespace

uint32_t crc32c(std::string_view data) { return crc32c_extend(0, data); }

uint32_t crc32c_extend(uint32_t crc, std::string_view data) {
  return extend_state(crc ^ 0xFFFFFFFF, data) ^ 0xFFFFFFFF;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8;
}

}  // namespace giant
