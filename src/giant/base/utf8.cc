#include "giant/base/utf8.h"

#include <cstdint>
#include <functional>

#include "giant/base/error.h"

namespace giant {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the sequence a lead byte starts and the range its second
// byte must fall in (the ranges exclude overlong forms, surrogates and code
// points past U+10FFFF); length 0 for a byte that starts nothing.
struct Lead {
  int length;
  unsigned char second_min, second_max;
};

Lead lead_of(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

bool is_control(uint32_t code_point) {
  if (code_point == '\n' || code_point == '\t') return false;
  return code_point < 0x20 || (code_point >= 0x7F && code_point <= 0x9F);
}

// The one decoder behind printable_utf8, valid_utf8 and
// percent_encode_ill_formed: each ill-formed subpart (and each control
// character when `keep_controls` is false) is appended by `replace`.
using Replace = std::function<void(std::string_view subpart, std::string& out)>;

std::string replace_ill_formed(std::string_view bytes, bool keep_controls, const Replace& replace) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead >= 0x20 && lead < 0x7F) {  // printable ASCII, most text: no decoding needed
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    const Lead l = lead_of(lead);
    if (l.length == 0) {
      replace(bytes.substr(i, 1), out);
      ++i;
      continue;
    }
    // The longest prefix of a valid sequence is one ill-formed subpart.
    uint32_t code_point = l.length == 1 ? lead : lead & (0xFF >> (l.length + 1));
    int taken = 1;
    for (; taken < l.length && i + taken < bytes.size(); ++taken) {
      const auto b = static_cast<unsigned char>(bytes[i + taken]);
      const bool fits = taken == 1 ? (b >= l.second_min && b <= l.second_max) : (b >= 0x80 && b <= 0xBF);
      if (!fits) break;
      code_point = (code_point << 6) | (b & 0x3F);
    }
    if (taken < l.length || (!keep_controls && is_control(code_point))) {
      replace(bytes.substr(i, static_cast<size_t>(taken)), out);
    } else {
      out.append(bytes.substr(i, static_cast<size_t>(taken)));
    }
    i += static_cast<size_t>(taken);
  }
  return out;
}

void append_replacement(std::string_view, std::string& out) { out += kReplacement; }

constexpr char kHexDigits[] = "0123456789ABCDEF";

void append_percent_encoded(std::string_view bytes, std::string& out) {
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += '%';
    out += kHexDigits[b >> 4];
    out += kHexDigits[b & 0xF];
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string printable_utf8(std::string_view bytes) { return replace_ill_formed(bytes, false, append_replacement); }

std::string valid_utf8(std::string_view bytes) { return replace_ill_formed(bytes, true, append_replacement); }

bool is_valid_utf8(std::string_view bytes) {
  bool valid = true;
  replace_ill_formed(bytes, true, [&valid](std::string_view, std::string&) { valid = false; });
  return valid;
}

std::string percent_encode_ill_formed(std::string_view bytes) {
  std::string escaped_percent;
  escaped_percent.reserve(bytes.size());
  for (const char c : bytes) {
    if (c == '%') {
      escaped_percent += "%25";
    } else {
      escaped_percent += c;
    }
  }
  return replace_ill_formed(escaped_percent, true, append_percent_encoded);
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int high = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      throw Error("'%' at byte " + std::to_string(i) + " is not followed by two hex digits (%25 is a '%')");
    }
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // A sequence is at most 4 bytes: its lead is among the last 3 if it is incomplete.
  for (size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    const size_t start = bytes.size() - back;
    const auto b = static_cast<unsigned char>(bytes[start]);
    if (b >= 0x80 && b <= 0xBF) continue;  // a continuation byte: look further back
    const Lead l = lead_of(b);
    if (l.length <= static_cast<int>(back)) return bytes.size();  // complete, ASCII or ill-formed
    for (size_t i = 1; i < back; ++i) {
      const auto c = static_cast<unsigned char>(bytes[start + i]);
      const bool fits = i == 1 ? (c >= l.second_min && c <= l.second_max) : (c >= 0x80 && c <= 0xBF);
      if (!fits) return bytes.size();  // ill-formed already
    }
    return start;
  }
  return bytes.size();
}

}  // namespace giant
