#include "giant/data/byte_unicode.h"

#include <array>

namespace giant::data {
namespace {

bool maps_to_itself(int byte) { return (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174; }

struct ByteMap {
  std::array<uint32_t, 256> code_point{};
  // Every byte character is below U+0144: the inverse is a small table (-1: no byte).
  std::array<int16_t, 0x144> byte{};

  ByteMap() {
    byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      code_point[b] = maps_to_itself(b) ? static_cast<uint32_t>(b) : next++;
      byte[code_point[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;  // immutable once built
  return map;
}

void append_utf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    *out += static_cast<char>(code_point);
  } else {  // every byte character fits in two UTF-8 bytes (below U+0800)
    *out += static_cast<char>(0xC0 | (code_point >> 6));
    *out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

}  // namespace

uint32_t byte_to_code_point(uint8_t byte) { return byte_map().code_point[byte]; }

bool token_text_to_bytes(std::string_view token, std::string* bytes) {
  const ByteMap& map = byte_map();
  bytes->clear();
  for (size_t i = 0; i < token.size();) {
    const auto lead = static_cast<unsigned char>(token[i]);
    uint32_t code_point;
    if (lead < 0x80) {
      code_point = lead;
      i += 1;
    } else if (lead >= 0xC2 && lead <= 0xDF && i + 1 < token.size() &&
               (static_cast<unsigned char>(token[i + 1]) & 0xC0) == 0x80) {
      code_point = ((lead & 0x1Fu) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;  // three bytes or more, or ill-formed: past every byte character
    }
    if (code_point >= map.byte.size() || map.byte[code_point] < 0) return false;
    *bytes += static_cast<char>(map.byte[code_point]);
  }
  return true;
}

std::string bytes_to_token_text(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(byte_to_code_point(static_cast<uint8_t>(c)), &text);
  return text;
}

}  // namespace giant::data
