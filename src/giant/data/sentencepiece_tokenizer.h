// SentencePiece ("sentencepiece:FILE.model") through libsentencepiece: the
// model's own normalization, pieces and ids; </s> as the end of a document.
#pragma once

#include <memory>
#include <string>

#include "giant/data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace giant::data {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // spec: the name as the user wrote it; model_file: the .model it names.
  // A missing or unloadable file -> ConfigError("data.tokenizer", ...) naming it.
  SentencePieceTokenizer(std::string spec, const std::string& model_file);
  ~SentencePieceTokenizer() override;

  std::string name() const override { return spec_; }
  int64_t vocab_size() const override;
  int32_t end_of_document() const override;  // the model's eos id, -1 when it has none
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;

 private:
  std::string spec_;
  // SentencePiece's Encode and Decode are const and keep no state: one processor serves every thread.
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace giant::data
