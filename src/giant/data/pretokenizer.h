// GPT-2's pre-tokenization: text cut into the pieces that BPE merges within
// (words with their leading space, numbers, punctuation runs, whitespace),
// by GPT-2's regex through PCRE2 (JIT-compiled where PCRE2 can). Pieces
// made of ASCII, which the pattern cuts by four classes of characters, are
// cut without PCRE2 (several times faster than its Unicode classes); a piece
// whose cut depends on a non-ASCII character is PCRE2's.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

namespace giant::data {

class Gpt2Pretokenizer {
 public:
  // Compiles the pattern; throws giant::Error if PCRE2 cannot. ascii_fast_path
  // false: PCRE2 cuts every piece (tests compare the two).
  explicit Gpt2Pretokenizer(bool ascii_fast_path = true);
  ~Gpt2Pretokenizer();
  Gpt2Pretokenizer(const Gpt2Pretokenizer&) = delete;
  Gpt2Pretokenizer& operator=(const Gpt2Pretokenizer&) = delete;

  // Replaces `pieces` with the pre-tokens of `text`, in order; together
  // they are `text`. `text` must be valid UTF-8 (base/utf8.h valid_utf8):
  // PCRE2 is told not to check it. Safe from several threads at once.
  void split(std::string_view text, std::vector<std::string_view>* pieces) const;

  // The pattern, in PCRE2's syntax (tests print it).
  static const char* pattern();

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  bool ascii_fast_path_;
};

}  // namespace giant::data
