#include "mutator.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace giant::fuzz {
namespace {

// Numbers at the edges of what the readers must bound: signed and unsigned
// 32- and 64-bit limits and one past them, negatives, fractions, exponents.
const std::vector<std::string> kHostileNumbers = {
    "0",    "-1",   "1",     "-0",          "0.5",        "1e308",       "1e999",       "-1e999",
    "2147483647",   "2147483648",           "4294967295", "4294967296",  "-2147483649", "9007199254740993",
    "9223372036854775807",  "9223372036854775808",  "-9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "99999999999999999999999999999", "1.0", "1e2", "NaN"};

// Strings a name or a dtype should never be.
const std::vector<std::string> kHostileStrings = {
    "",      "..",      "../x",   "/etc/passwd", "a/../../b", "F128",    "BF16", "U64",        "__metadata__",
    "\\u0000", "\\ud800", "\xff\xfe", "gelu_tanh",  "rank_00000.safetensors", "giant-checkpoint", "x@0,0"};

// JSON tokens inserted on their own.
const std::string kTokens = "{}[]\",:-0123456789eE. \\tnul";

// Where the JSON member (a "key": value pair) that starts with the quote at
// `begin` ends: the comma or closing bracket after its value, at depth 0.
size_t member_end(const std::string& s, size_t begin) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = begin; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;
      --depth;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return s.size();
}

}  // namespace

std::string Mutator::mutate(const std::string& input, const std::vector<std::string>& others) {
  std::string s = input;
  const uint64_t count = 1 + below(4);
  for (uint64_t i = 0; i < count; ++i) {
    switch (below(10)) {
      case 0: flip_bit(s); break;
      case 1: insert_byte(s); break;
      case 2: erase_range(s); break;
      case 3: truncate(s); break;
      case 4: splice(s, others); break;
      case 5:
      case 6: replace_number(s); break;
      case 7:
      case 8: duplicate_member(s); break;
      default: replace_string(s); break;
    }
  }
  return s;
}

uint64_t Mutator::mutate_size(uint64_t actual) {
  switch (below(6)) {
    case 0: return 0;
    case 1: return below(actual + 1);
    case 2: return actual + 1 + below(64);
    case 3: return actual - std::min<uint64_t>(actual, 1 + below(64));
    case 4: return ~uint64_t{0} - below(16);
    default: return uint64_t{1} << below(64);
  }
}

void Mutator::flip_bit(std::string& s) {
  if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
}

void Mutator::insert_byte(std::string& s) {
  const char c = below(2) == 0 ? kTokens[below(kTokens.size())] : static_cast<char>(below(256));
  s.insert(s.begin() + static_cast<std::ptrdiff_t>(below(s.size() + 1)), c);
}

void Mutator::erase_range(std::string& s) {
  if (s.empty()) return;
  const size_t at = below(s.size());
  s.erase(at, 1 + below(std::min<size_t>(16, s.size() - at)));
}

void Mutator::truncate(std::string& s) { s.resize(below(s.size() + 1)); }

void Mutator::splice(std::string& s, const std::vector<std::string>& others) {
  if (others.empty()) return;
  const std::string& other = others[below(others.size())];
  s = s.substr(0, below(s.size() + 1)) + other.substr(below(other.size() + 1));
}

void Mutator::replace_number(std::string& s) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(s[i])) != 0;
    const bool after_digit = i > 0 && (std::isdigit(static_cast<unsigned char>(s[i - 1])) != 0 || s[i - 1] == '-');
    if (digit && !after_digit) starts.push_back(i);
  }
  if (starts.empty()) return;
  size_t begin = starts[below(starts.size())];
  if (begin > 0 && s[begin - 1] == '-') --begin;
  size_t end = begin + 1;
  while (end < s.size() && (std::isdigit(static_cast<unsigned char>(s[end])) != 0 || s[end] == '.' ||
                            s[end] == 'e' || s[end] == 'E' || s[end] == '+' || s[end] == '-')) {
    ++end;
  }
  s.replace(begin, end - begin, kHostileNumbers[below(kHostileNumbers.size())]);
}

void Mutator::duplicate_member(std::string& s) {
  // A member starts at a quote after '{' or ',' (spaces allowed between).
  std::vector<size_t> starts;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '"') continue;
    size_t j = i;
    while (j > 0 && s[j - 1] == ' ') --j;
    if (j > 0 && (s[j - 1] == '{' || s[j - 1] == ',')) starts.push_back(i);
  }
  if (starts.empty()) return;
  const size_t begin = starts[below(starts.size())];
  const size_t end = member_end(s, begin);
  s.insert(end, "," + s.substr(begin, end - begin));
}

void Mutator::replace_string(std::string& s) {
  // A string value: a quote after ':' or '[' or ','.
  std::vector<size_t> starts;
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i] == '"' && (s[i - 1] == ':' || s[i - 1] == '[' || s[i - 1] == ',')) starts.push_back(i);
  }
  if (starts.empty()) return;
  const size_t begin = starts[below(starts.size())] + 1;
  const size_t end = s.find('"', begin);
  if (end == std::string::npos) return;
  std::string replacement = kHostileStrings[below(kHostileStrings.size())];
  if (below(16) == 0) replacement = std::string(1 + below(100000), 'x');  // long names
  s.replace(begin, end - begin, replacement);
}

std::string hex_dump(const std::string& bytes) {
  std::string text;
  char hex[4];
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(bytes[i]));
    text += hex;
    text += (i % 32 == 31 || i + 1 == bytes.size()) ? "\n" : " ";
  }
  return text;
}

}  // namespace giant::fuzz
