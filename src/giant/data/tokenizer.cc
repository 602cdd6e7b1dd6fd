#include "giant/data/tokenizer.h"

#include "giant/base/error.h"
#include "giant/data/gpt2_bpe.h"
#include "giant/data/gpt2_vocabulary.h"
#include "giant/data/sentencepiece_tokenizer.h"

namespace giant::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    // Through unsigned char: plain char may be signed, and bytes >= 0x80 must map to 128..255.
    tokens[i] = static_cast<unsigned char>(text[i]);
  }
  return tokens;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t id = tokens[i];
    GIANT_CHECK(id >= 0 && id < 256, "byte tokenizer: token id ", id, " at position ", i,
                " is outside the vocabulary [0, 256)");
    text[i] = static_cast<char>(static_cast<unsigned char>(id));
  }
  return text;
}

std::vector<std::string> tokenizer_names() { return {"byte", "gpt2:DIR", "sentencepiece:FILE.model"}; }

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name) {
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  const std::string gpt2 = "gpt2:";
  if (name.rfind(gpt2, 0) == 0) {
    const std::string dir = name.substr(gpt2.size());
    if (dir.empty()) throw ConfigError("data.tokenizer", "'" + name + "' names no folder (gpt2:DIR)");
    return std::make_unique<Gpt2BpeTokenizer>(name, load_gpt2_vocabulary(dir));
  }
  const std::string sentencepiece = "sentencepiece:";
  if (name.rfind(sentencepiece, 0) == 0) {
    const std::string file = name.substr(sentencepiece.size());
    if (file.empty()) throw ConfigError("data.tokenizer", "'" + name + "' names no model (sentencepiece:FILE.model)");
    return std::make_unique<SentencePieceTokenizer>(name, file);
  }
  std::string known;
  for (const auto& n : tokenizer_names()) known += (known.empty() ? "'" : ", '") + n + "'";
  throw ConfigError("data.tokenizer",
                    "unknown tokenizer '" + name + "'; known tokenizers: " + known);
}

}  // namespace giant::data
