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

namespace {

// A spec split at its kind: "gpt2:DIR" -> {gpt2, DIR}.
enum class TokenizerKind { byte, gpt2, sentencepiece };
struct ParsedSpec {
  TokenizerKind kind;
  std::string argument;  // DIR or FILE.model
};

ParsedSpec parse_spec(const std::string& spec) {
  if (spec == "byte") return {TokenizerKind::byte, ""};
  const std::string gpt2 = "gpt2:";
  if (spec.rfind(gpt2, 0) == 0) {
    std::string dir = spec.substr(gpt2.size());
    if (dir.empty()) throw ConfigError("data.tokenizer", "'" + spec + "' names no folder (gpt2:DIR)");
    return {TokenizerKind::gpt2, std::move(dir)};
  }
  const std::string sentencepiece = "sentencepiece:";
  if (spec.rfind(sentencepiece, 0) == 0) {
    std::string file = spec.substr(sentencepiece.size());
    if (file.empty()) throw ConfigError("data.tokenizer", "'" + spec + "' names no model (sentencepiece:FILE.model)");
    return {TokenizerKind::sentencepiece, std::move(file)};
  }
  std::string known;
  for (const auto& n : tokenizer_names()) known += (known.empty() ? "'" : ", '") + n + "'";
  throw ConfigError("data.tokenizer", "unknown tokenizer '" + spec + "'; known tokenizers: " + known);
}

constexpr const char* kSentencePieceCopy = "tokenizer.model";

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& name) {
  const ParsedSpec parsed = parse_spec(name);
  switch (parsed.kind) {
    case TokenizerKind::byte: return std::make_unique<ByteTokenizer>();
    case TokenizerKind::gpt2: return std::make_unique<Gpt2BpeTokenizer>(name, load_gpt2_vocabulary(parsed.argument));
    case TokenizerKind::sentencepiece: return std::make_unique<SentencePieceTokenizer>(name, parsed.argument);
  }
  throw Error("unknown tokenizer kind");
}

std::vector<TokenizerFile> tokenizer_files(const std::string& spec) {
  const ParsedSpec parsed = parse_spec(spec);
  switch (parsed.kind) {
    case TokenizerKind::byte: return {};
    case TokenizerKind::gpt2: {
      const Gpt2Files files = gpt2_files(parsed.argument);
      return {{files.vocab, kGpt2VocabFile}, {files.merges, kGpt2MergesFile}};
    }
    case TokenizerKind::sentencepiece: return {{parsed.argument, kSentencePieceCopy}};
  }
  throw Error("unknown tokenizer kind");
}

std::string tokenizer_spec_in(const std::string& spec, const std::string& dir) {
  switch (parse_spec(spec).kind) {
    case TokenizerKind::byte: return spec;
    case TokenizerKind::gpt2: return "gpt2:" + dir;
    case TokenizerKind::sentencepiece: return "sentencepiece:" + dir + "/" + kSentencePieceCopy;
  }
  throw Error("unknown tokenizer kind");
}

}  // namespace giant::data
