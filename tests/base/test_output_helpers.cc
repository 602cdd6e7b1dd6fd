// The helpers behind what runs write for people and tools: printable UTF-8,
// percent-encoded bytes,
// wall-clock time, peak memory and CRC-32C.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "giant/base/crc32c.h"
#include "giant/base/error.h"
#include "giant/base/host_memory.h"
#include "giant/base/utf8.h"
#include "giant/base/wall_clock.h"

namespace giant {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string times(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Well-formed UTF-8 by the definition of RFC 3629, checked apart from the
// sanitiser: every byte belongs to a shortest-form scalar value.
bool well_formed(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

TEST(PrintableUtf8, KeepsValidPrintableText) {
  const std::string text = "plain ASCII\twith tab\nand newline; caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, "
                           "U+00A0 \xC2\xA0, U+FFFD " + kFffd + ", U+10FFFF \xF4\x8F\xBF\xBF";
  EXPECT_EQ(printable_utf8(text), text);
  EXPECT_EQ(printable_utf8(""), "");
}

TEST(PrintableUtf8, ReplacesControlCharacters) {
  EXPECT_EQ(printable_utf8(std::string("a\0b", 3)), "a" + kFffd + "b");
  EXPECT_EQ(printable_utf8("\x1B[2J\r\x07\x7F"), kFffd + "[2J" + times(kFffd, 3));
  // C1 controls, well-formed as UTF-8 (U+0080, U+009B CSI, U+009F).
  EXPECT_EQ(printable_utf8("\xC2\x80\xC2\x9B\xC2\x9F"), times(kFffd, 3));
  EXPECT_EQ(printable_utf8("\n\t"), "\n\t");
}

TEST(PrintableUtf8, ReplacesEachMaximalIllFormedSubpart) {
  // Stray continuation bytes and bytes that start nothing: one each.
  EXPECT_EQ(printable_utf8("\x80\xBF"), times(kFffd, 2));
  EXPECT_EQ(printable_utf8("a\x9E" "b\xFF\xFE\xF5"), "a" + kFffd + "b" + times(kFffd, 3));
  // Truncated sequences: one for the whole prefix, then what follows.
  EXPECT_EQ(printable_utf8("\xE2\x82"), kFffd);
  EXPECT_EQ(printable_utf8("\xE2\x82z"), kFffd + "z");
  EXPECT_EQ(printable_utf8("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(printable_utf8("\xF0\x9F\x98\xC3\xA9"), kFffd + "\xC3\xA9");
  EXPECT_EQ(printable_utf8("\xC3"), kFffd);
  // Overlong encodings ('/' as 2, 3 and 4 bytes, NUL as 2): no byte starts a valid prefix.
  EXPECT_EQ(printable_utf8("\xC0\xAF"), times(kFffd, 2));
  EXPECT_EQ(printable_utf8("\xC1\xBF"), times(kFffd, 2));
  EXPECT_EQ(printable_utf8("\xE0\x80\xAF"), times(kFffd, 3));
  EXPECT_EQ(printable_utf8("\xF0\x80\x80\xAF"), times(kFffd, 4));
  EXPECT_EQ(printable_utf8("\xC0\x80"), times(kFffd, 2));
  // Surrogates U+D800 and U+DFFF, and a CESU-8 pair.
  EXPECT_EQ(printable_utf8("\xED\xA0\x80"), times(kFffd, 3));
  EXPECT_EQ(printable_utf8("\xED\xBF\xBF"), times(kFffd, 3));
  EXPECT_EQ(printable_utf8("\xED\xA0\xBD\xED\xB8\x80"), times(kFffd, 6));
  EXPECT_EQ(printable_utf8("\xED\x9F\xBF"), "\xED\x9F\xBF");  // U+D7FF, just below
  // Past U+10FFFF.
  EXPECT_EQ(printable_utf8("\xF4\x90\x80\x80"), times(kFffd, 4));
}

TEST(PrintableUtf8, ArbitraryBytesBecomeWellFormedPrintableText) {
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (int round = 0; round < 200; ++round) {
    std::string bytes;
    for (int i = 0; i < 64; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      bytes += static_cast<char>(state >> 56);
    }
    const std::string text = printable_utf8(bytes);
    ASSERT_TRUE(well_formed(text)) << round;
    for (unsigned char c : text) ASSERT_TRUE(c >= 0x20 || c == '\n' || c == '\t') << round;
    ASSERT_EQ(text.find("\xC2\x80"), std::string::npos);  // no C1 controls either
    ASSERT_EQ(printable_utf8(text), text) << round;  // a fixed point
  }
  // Every single byte.
  for (int b = 0; b < 256; ++b) {
    const std::string text = printable_utf8(std::string(1, static_cast<char>(b)));
    const bool kept = (b >= 0x20 && b < 0x7F) || b == '\n' || b == '\t';
    EXPECT_EQ(text, kept ? std::string(1, static_cast<char>(b)) : kFffd) << b;
  }
}

// valid_utf8 replaces what printable_utf8 replaces as ill-formed, the same
// way, and keeps control characters (tokenizers see text as node reads it).
TEST(ValidUtf8, KeepsControlsAndReplacesIllFormedSubpartsAsPrintableDoes) {
  const std::string controls("a\0b\r\n\x1B[2J\x07\x7F\xC2\x80\xC2\x9F", 15);
  EXPECT_EQ(valid_utf8(controls), controls);
  EXPECT_EQ(valid_utf8(""), "");
  EXPECT_EQ(valid_utf8("\xF0\x9F\x98\xC3\xA9\x80\xED\xA0\x80z"), kFffd + "\xC3\xA9" + times(kFffd, 4) + "z");
  uint64_t state = 0x2545F4914F6CDD1DULL;
  for (int round = 0; round < 200; ++round) {
    std::string bytes;
    for (int i = 0; i < 64; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      bytes += static_cast<char>(state >> 56);
    }
    const std::string text = valid_utf8(bytes);
    ASSERT_TRUE(well_formed(text)) << round;
    ASSERT_EQ(valid_utf8(text), text) << round;
    // Where no control character is involved, both give the same text.
    std::string no_controls;
    for (char c : bytes) no_controls += (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) ? 'x' : c;
    if (no_controls.find("\xC2") == std::string::npos) {
      ASSERT_EQ(valid_utf8(no_controls), printable_utf8(no_controls)) << round;
    }
  }
}

// A POSIX path is any bytes; TOML's strings are UTF-8. Percent-encoding the
// ill-formed bytes (and '%') gives valid UTF-8 that decodes to the same bytes,
// leaving well-formed characters as they are.
TEST(PercentEncodeIllFormed, RoundTripsAnyBytes) {
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \x01"));
  EXPECT_FALSE(is_valid_utf8("caf\xE9"));
  EXPECT_EQ(percent_encode_ill_formed("/data/caf\xE9/100%.bin"), "/data/caf%E9/100%25.bin");
  EXPECT_EQ(percent_encode_ill_formed("\xC3\xA9\xF0\x9F\x98"), "\xC3\xA9%F0%9F%98");
  EXPECT_EQ(percent_decode("/data/caf%E9/100%25.bin"), "/data/caf\xE9/100%.bin");
  EXPECT_EQ(percent_decode("%e9"), "\xE9");
  EXPECT_THROW(percent_decode("100%"), Error);
  EXPECT_THROW(percent_decode("%G0"), Error);
  uint64_t state = 0x243F6A8885A308D3ULL;
  for (int round = 0; round < 200; ++round) {
    std::string bytes;
    for (int i = 0; i < 64; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      bytes += static_cast<char>(state >> 56);
    }
    const std::string text = percent_encode_ill_formed(bytes);
    ASSERT_TRUE(well_formed(text)) << round;
    ASSERT_EQ(percent_decode(text), bytes) << round;
  }
}

// Text shown piece by piece holds back only a character still being completed.
TEST(CompleteUtf8Prefix, HoldsBackOnlyAnIncompleteCharacter) {
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("a\xC3"), 1u);              // the lead of é
  EXPECT_EQ(complete_utf8_prefix("a\xC3\xA9"), 3u);          // é
  EXPECT_EQ(complete_utf8_prefix("a\xE2\x82"), 1u);          // two bytes of €
  EXPECT_EQ(complete_utf8_prefix("a\xE2\x82\xAC"), 4u);      // €
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98"), 0u);       // three bytes of an emoji
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98\x80"), 4u);
  // Ill-formed bytes are complete: nothing that follows can make them a character.
  EXPECT_EQ(complete_utf8_prefix("a\xFF"), 2u);
  EXPECT_EQ(complete_utf8_prefix("a\x80"), 2u);
  EXPECT_EQ(complete_utf8_prefix("a\xE0\x80"), 3u);          // overlong: 0x80 cannot follow E0
  EXPECT_EQ(complete_utf8_prefix("a\xC3\x41"), 3u);
  EXPECT_EQ(complete_utf8_prefix("\x80\x80\x80"), 3u);
  // Showing each complete prefix as it grows gives the whole text's printable form.
  const std::string text = "x\xC3\xA9\xE2\x82\xAC\xE2\xE2\x82\x41\xF0\x9F\x98\x80\xC3";
  std::string shown, pending;
  for (char c : text) {
    pending += c;
    const size_t ready = complete_utf8_prefix(pending);
    shown += printable_utf8(pending.substr(0, ready));
    pending.erase(0, ready);
  }
  shown += printable_utf8(pending);
  EXPECT_EQ(shown, printable_utf8(text));
}

TEST(WallClock, Iso8601InUtcToTheMillisecond) {
  using namespace std::chrono;
  const WallClock::time_point t{seconds(1796113800) + milliseconds(123)};
  EXPECT_EQ(iso8601_utc(t), "2026-12-01T08:30:00.123Z");
  EXPECT_EQ(iso8601_utc(WallClock::time_point{}), "1970-01-01T00:00:00.000Z");
  EXPECT_DOUBLE_EQ(unix_seconds(t), 1796113800.123);
  const std::regex shape(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  EXPECT_TRUE(std::regex_match(iso8601_utc(WallClock::now()), shape));
}

TEST(HostMemory, MaxResidentBytesGrowsWithTouchedMemory) {
  const int64_t before = max_resident_bytes();
  EXPECT_GT(before, 1 << 20);  // a running test binary holds more than 1 MiB
  constexpr size_t kSize = 64 << 20;
  std::vector<char> block(kSize, 1);  // touched, so resident
  EXPECT_GE(max_resident_bytes(), static_cast<int64_t>(kSize)) << before;
  EXPECT_EQ(block[kSize / 2], 1);
}

TEST(Crc32c, MatchesTheCastagnoliCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xFF, and ascending 0..31.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32c, MaskedAsTfRecordFramesIt) {
  // ((0xE3069283 >> 15) | (0xE3069283 << 17)) + 0xA282EAD8, mod 2^32.
  EXPECT_EQ(masked_crc32c("123456789"), 0xC78AB0E5u);  // rotated 0x2507C60D
  EXPECT_EQ(masked_crc32c(""), 0xA282EAD8u);  // the CRC of nothing is 0
  const std::string zero_length(8, '\0');    // a TFRecord header for an empty record
  const uint32_t crc = crc32c(zero_length);
  EXPECT_EQ(masked_crc32c(zero_length), ((crc >> 15) | (crc << 17)) + 0xA282EAD8u);
}

}  // namespace
}  // namespace giant
