#include "giant/data/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <string>

#include "giant/base/error.h"

namespace giant::data {
namespace {

// GPT-2's pattern is written for JavaScript's (and Python's) \s, which is
// not PCRE2's: JavaScript's \s is tab, LF, VT, FF, CR, the Space_Separator
// characters, U+2028, U+2029 and U+FEFF, while PCRE2's (with UCP) adds U+0085
// and U+180E and lacks U+FEFF. So the pattern spells the JavaScript set out.
#define GIANT_JS_SPACE "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

// \p{L} and \p{N} follow the Unicode version of the engine's tables: PCRE2
// 10.42 (Debian 12) has Unicode 14, node 20 (the reference encoder's) has
// Unicode 17. These are the letters and numbers Unicode 15 to 17 assigned
// (from node's /\p{L}/u and /\p{N}/u against PCRE2's, every code point
// compared: nothing is a letter or number in 14 that is not in 17), so that
// both engines class every code point alike. A later PCRE2 knows them
// already; listing them again changes nothing.
#define GIANT_NEW_LETTERS                                                                          \
  "\\x{88F}\\x{C5C}\\x{CDC}\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CF}\\x{A7D2}\\x{A7D4}"                    \
  "\\x{A7DA}-\\x{A7DC}\\x{A7F1}\\x{105C0}-\\x{105F3}\\x{10940}-\\x{10959}\\x{10D4A}-\\x{10D65}"         \
  "\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC7}\\x{1123F}-\\x{11240}\\x{11380}-\\x{11389}\\x{1138B}"      \
  "\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}\\x{113D3}\\x{11BC0}-\\x{11BE0}"                  \
  "\\x{11DB0}-\\x{11DDB}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}\\x{1342F}"                 \
  "\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}\\x{16D40}-\\x{16D6C}"                \
  "\\x{16EA0}-\\x{16EB8}\\x{16EBB}-\\x{16ED3}\\x{16FF2}-\\x{16FF3}\\x{187F8}-\\x{187FF}\\x{18CFF}"      \
  "\\x{18D09}-\\x{18D1E}\\x{18D80}-\\x{18DF2}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}"                 \
  "\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{1E6C0}-\\x{1E6DE}"      \
  "\\x{1E6E0}-\\x{1E6E2}\\x{1E6E4}-\\x{1E6E5}\\x{1E6E7}-\\x{1E6ED}\\x{1E6F0}-\\x{1E6F4}"                \
  "\\x{1E6FE}-\\x{1E6FF}\\x{2B739}-\\x{2B73F}\\x{2CEA2}-\\x{2CEAD}\\x{2EBF0}-\\x{2EE5D}"                \
  "\\x{31350}-\\x{33479}"
#define GIANT_NEW_NUMBERS                                                                          \
  "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11DE0}-\\x{11DE9}"                \
  "\\x{11F50}-\\x{11F59}\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{16FF4}-\\x{16FF6}"                \
  "\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}"

#define GIANT_LETTER "\\p{L}" GIANT_NEW_LETTERS
#define GIANT_NUMBER "\\p{N}" GIANT_NEW_NUMBERS

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s and \S spelled as above.
constexpr const char* kPattern =
    "'s|'t|'re|'ve|'m|'ll|'d"
    "| ?[" GIANT_LETTER "]+"
    "| ?[" GIANT_NUMBER "]+"
    "| ?[^" GIANT_JS_SPACE GIANT_LETTER GIANT_NUMBER "]+"
    "|[" GIANT_JS_SPACE "]+(?![^" GIANT_JS_SPACE "])"
    "|[" GIANT_JS_SPACE "]+";

// The ASCII characters as the pattern classes them (a contraction's
// apostrophe is `other` outside a contraction).
enum class Kind : uint8_t { kLetter, kNumber, kSpace, kOther, kNonAscii, kEnd };

Kind kind_at(std::string_view text, size_t i) {
  if (i >= text.size()) return Kind::kEnd;
  const auto c = static_cast<unsigned char>(text[i]);
  if (c >= 0x80) return Kind::kNonAscii;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return Kind::kLetter;
  if (c >= '0' && c <= '9') return Kind::kNumber;
  if (c == ' ' || (c >= '\t' && c <= '\r')) return Kind::kSpace;  // tab, LF, VT, FF, CR
  return Kind::kOther;
}

// The length of the piece the pattern matches at `start`, worked out as it
// would be, alternative by alternative, when every character that decides
// it is ASCII; 0 when a non-ASCII character would (its class is PCRE2's to say).
size_t ascii_piece(std::string_view text, size_t start) {
  const size_t n = text.size();
  if (text[start] == '\'' && start + 1 < n) {  // 's 't 're 've 'm 'll 'd
    const char d = text[start + 1];
    if (d == 's' || d == 't' || d == 'm' || d == 'd') return 2;
    const char e = start + 2 < n ? text[start + 2] : '\0';
    if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return 3;
  }
  Kind kind = kind_at(text, start);
  size_t run_start = start;
  if (text[start] == ' ') {  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" take the space with what follows
    const Kind next = kind_at(text, start + 1);
    if (next == Kind::kNonAscii) return 0;
    if (next == Kind::kLetter || next == Kind::kNumber || next == Kind::kOther) {
      kind = next;
      run_start = start + 1;
    }
  }
  if (kind == Kind::kNonAscii) return 0;
  size_t end = run_start;
  while (kind_at(text, end) == kind) ++end;
  if (kind_at(text, end) == Kind::kNonAscii) return 0;  // it may continue the run
  if (kind != Kind::kSpace || end == n) return end - start;
  // "\s+(?!\S)" before a non-space gives the run back but its last space, which
  // then stands alone ("\s+"); a run of one space is that alone at once.
  return end - start >= 2 ? end - 1 - start : 1;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct Gpt2Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

Gpt2Pretokenizer::Gpt2Pretokenizer(bool ascii_fast_path)
    : compiled_(std::make_unique<Compiled>()), ascii_fast_path_(ascii_fast_path) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  GIANT_CHECK(compiled_->code != nullptr, "GPT-2 pre-tokenizer: PCRE2 cannot compile the pattern at offset ",
              offset, ": ", pcre2_message(error));
  // JIT is several times faster; without it (a platform PCRE2 has no JIT for) the interpreter gives the same pieces.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Gpt2Pretokenizer::~Gpt2Pretokenizer() = default;

const char* Gpt2Pretokenizer::pattern() { return kPattern; }

void Gpt2Pretokenizer::split(std::string_view text, std::vector<std::string_view>* pieces) const {
  pieces->clear();
  // Match data per call: the compiled pattern is shared between threads, the match state is not.
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  GIANT_CHECK(match != nullptr, "GPT-2 pre-tokenizer: out of memory for PCRE2's match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
  size_t start = 0;
  bool jit = compiled_->jit;
  while (start < text.size()) {
    if (const size_t ascii = ascii_fast_path_ ? ascii_piece(text, start) : 0) {
      pieces->emplace_back(text.data() + start, ascii);
      start += ascii;
      continue;
    }
    int rc = jit ? pcre2_jit_match(compiled_->code, subject, text.size(), start, 0, match.get(), nullptr)
                 : pcre2_match(compiled_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, match.get(),
                               nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // JIT's small default stack: the interpreter has no such limit
      jit = false;
      continue;
    }
    // Every character is a space, a letter, a number or none of these, so the pattern matches at `start`.
    GIANT_CHECK(rc > 0, "GPT-2 pre-tokenizer: PCRE2 failed at byte ", start, ": ", pcre2_message(rc));
    GIANT_CHECK(ovector[0] == start && ovector[1] > start, "GPT-2 pre-tokenizer: a gap or an empty piece at byte ",
                start);
    pieces->emplace_back(text.data() + start, ovector[1] - start);
    start = ovector[1];
  }
}

}  // namespace giant::data
