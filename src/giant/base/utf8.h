// Text from arbitrary bytes that is safe to print and to store as JSON or
// TOML.
#pragma once

#include <string>
#include <string_view>

namespace giant {

// The bytes as valid UTF-8 with nothing in them that drives a terminal:
// each ill-formed stretch (a stray continuation byte, a truncated sequence,
// an overlong encoding, a surrogate, a code point past U+10FFFF) becomes one
// U+FFFD per maximal ill-formed subpart, as Unicode recommends and Python's
// errors="replace" does; control characters other than newline and tab (C0,
// DEL and C1, which move the cursor, switch modes or make grep call a log
// binary) become U+FFFD too. Valid printable text passes unchanged.
std::string printable_utf8(std::string_view bytes);

// The bytes as valid UTF-8: each maximal ill-formed subpart becomes one
// U+FFFD as in printable_utf8, but every well-formed character, control
// characters included, passes unchanged. This is what node's (and Python's
// errors="replace") decoding of a file does, so text reaches the GPT-2
// tokenizer as the reference encoder sees it.
std::string valid_utf8(std::string_view bytes);

// Whether the bytes are valid UTF-8 (valid_utf8 would leave them as they are).
bool is_valid_utf8(std::string_view bytes);

// The bytes as valid UTF-8 that percent_decode turns back into exactly
// them: '%' and each byte of an ill-formed subpart become %XX (RFC 3986's
// percent-encoding); every well-formed character passes unchanged, so a
// path with one stray Latin-1 byte stays readable. For text that must be
// UTF-8 (a TOML string) but stands for arbitrary bytes (a POSIX path).
std::string percent_encode_ill_formed(std::string_view bytes);
// Each %XX back to its byte, the rest unchanged. giant::Error for a '%'
// not followed by two hex digits.
std::string percent_decode(std::string_view text);

// The length of `bytes` without a trailing incomplete UTF-8 sequence (a lead
// byte followed by fewer continuation bytes than it announces, each valid so
// far): what text arriving piece by piece can show now without splitting a
// character that the next bytes may complete. Ill-formed bytes count as
// complete (nothing can complete them).
size_t complete_utf8_prefix(std::string_view bytes);

}  // namespace giant
