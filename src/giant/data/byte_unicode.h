// GPT-2's byte-to-unicode map: every byte has a printable character, so a
// byte-level vocabulary can be written as text (vocab.json, merges.txt).
// Bytes 33-126, 161-172 and 174-255 are their own code point; the other 68
// map to U+0100, U+0101, ... in increasing byte order (space is U+0120 'Ġ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace giant::data {

// The code point that stands for `byte`.
uint32_t byte_to_code_point(uint8_t byte);

// The raw bytes a vocabulary token stands for: each character of `token`
// (UTF-8) must be one of the 256 byte characters. Returns false, leaving
// `bytes` unspecified, when one is not.
bool token_text_to_bytes(std::string_view token, std::string* bytes);

// The vocabulary text of raw bytes (the inverse of token_text_to_bytes).
std::string bytes_to_token_text(std::string_view bytes);

}  // namespace giant::data
