// Tokenizers turn text into token ids and back. The model only sees ids in
// [0, vocab_size()); the vocabulary it allocates may be padded above that.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace giant::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The name make_tokenizer() accepts for this tokenizer ("byte").
  virtual std::string name() const = 0;
  virtual int64_t vocab_size() const = 0;
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
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;
};

// The names make_tokenizer() knows, in the order error messages list them.
std::vector<std::string> tokenizer_names();

// "byte" -> ByteTokenizer; anything else -> ConfigError("data.tokenizer", ...)
// listing the known names.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name);

}  // namespace giant::data
