// Tokenizers turn text into token ids and back. The model only sees ids in
// [0, vocab_size()); the vocabulary it allocates may be padded above that.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace giant::data {

// encode and decode are safe to call from several threads at once (giant
// data prepare's workers share one tokenizer).
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The spec make_tokenizer() accepts for this tokenizer ("byte",
  // "gpt2:DIR", "sentencepiece:FILE.model"), as the user wrote it.
  virtual std::string name() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The id that ends a document (GPT-2's <|endoftext|>, SentencePiece's
  // </s>), or -1 when the tokenizer has none (byte).
  virtual int32_t end_of_document() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids outside [0, vocab_size()) throw giant::Error naming the id and its position.
  virtual std::string decode(const std::vector<int32_t>& tokens) const = 0;
};

// One token per byte: id = byte value, vocabulary 256. Lossless for any
// input, UTF-8 or not, so it needs no training and no vocabulary file.
class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  int64_t vocab_size() const override { return 256; }
  int32_t end_of_document() const override { return -1; }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;
};

// The spec forms make_tokenizer() knows ("byte", "gpt2:DIR",
// "sentencepiece:FILE.model"), in the order error messages list them.
std::vector<std::string> tokenizer_names();

// "byte" -> ByteTokenizer; "gpt2:DIR" -> GPT-2 byte-level BPE from DIR
// (vocab.json + merges.txt, or OpenAI's encoder.json + vocab.bpe);
// "sentencepiece:FILE.model" -> SentencePiece. Anything else, or files that
// cannot be read or parsed -> ConfigError("data.tokenizer", ...) naming the
// file (and, for an unknown spec, listing the known forms).
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);

// A file a tokenizer reads, and the name its copy takes in a folder that
// carries the tokenizer (a checkpoint, a Hugging Face export): vocab.json
// and merges.txt for GPT-2's BPE (whatever the source folder calls them),
// tokenizer.model for SentencePiece.
struct TokenizerFile {
  std::string path;  // where `spec` reads it
  std::string name;  // the copy's name
};
// The files `spec` reads (none for byte). ConfigError("data.tokenizer", ...)
// for a spec make_tokenizer() does not know.
std::vector<TokenizerFile> tokenizer_files(const std::string& spec);
// The spec of the same tokenizer reading the copies tokenizer_files(spec)
// names in `dir` ("byte" stays "byte").
std::string tokenizer_spec_in(const std::string& spec, const std::string& dir);

}  // namespace giant::data
