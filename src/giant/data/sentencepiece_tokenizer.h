// SentencePiece ("sentencepiece:FILE.model") through libsentencepiece: the
// model's own normalization, pieces and ids; </s> as the end of a document.
// libsentencepiece is reached through a module loaded on first use
// (sentencepiece_module.cc says why), next to the program
// (../LIBDIR/giant/ from its folder, as installed) or in the build tree.
#pragma once

#include <string>

#include "giant/data/tokenizer.h"

namespace giant::data {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // spec: the name as the user wrote it; model_file: the .model it names.
  // A missing or unloadable file -> ConfigError("data.tokenizer", ...) naming it.
  SentencePieceTokenizer(std::string spec, const std::string& model_file);
  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::string name() const override { return spec_; }
  int64_t vocab_size() const override { return vocab_size_; }
  int32_t end_of_document() const override { return end_of_document_; }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;

 private:
  std::string spec_;
  // SentencePiece's Encode and Decode are const and keep no state: one processor serves every thread.
  void* processor_;
  int64_t vocab_size_;
  int32_t end_of_document_;
};

}  // namespace giant::data
