// GPT-2's byte-level BPE tokenizer ("gpt2:DIR"), encoding exactly as
// OpenAI's encoder and the npm package gpt-3-encoder 1.1.4 do: text as
// valid UTF-8 (ill-formed bytes become U+FFFD, as node reads a file), cut by
// GPT-2's pattern, each piece's bytes merged by rank. <|endoftext|> in the
// text is plain text, as in the reference; its id is end_of_document().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "giant/data/bpe_cache.h"
#include "giant/data/gpt2_vocabulary.h"
#include "giant/data/pretokenizer.h"
#include "giant/data/tokenizer.h"

namespace giant::data {

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // spec: the name as the user wrote it ("gpt2:DIR").
  Gpt2BpeTokenizer(std::string spec, Gpt2Vocabulary vocabulary);

  std::string name() const override { return spec_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(token_bytes_.size()); }
  int32_t end_of_document() const override { return end_of_document_; }
  std::vector<int32_t> encode(std::string_view text) const override;
  // The tokens' bytes, with ill-formed UTF-8 (a character cut between
  // tokens) replaced by U+FFFD as the reference's TextDecoder does.
  std::string decode(const std::vector<int32_t>& tokens) const override;

  size_t cached_words() const { return cache_.size(); }  // tests: the cache stays bounded

 private:
  struct Merge {
    int32_t rank;
    int32_t joined;
  };
  // Appends the ids of one pre-token to `out`.
  void encode_piece(std::string_view piece, std::vector<int32_t>* out) const;
  // Merges `symbols` (ids, one per byte) in place by rank, as GPT-2's bpe() does.
  void merge(std::vector<int32_t>* symbols) const;
  const Merge* find_merge(int32_t left, int32_t right) const;

  std::string spec_;
  std::vector<std::string> token_bytes_;
  int32_t end_of_document_;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  Gpt2Pretokenizer pretokenizer_;
  mutable BpeCache cache_;  // encode() is const: the cache is no part of the tokenizer's value
};

}  // namespace giant::data
