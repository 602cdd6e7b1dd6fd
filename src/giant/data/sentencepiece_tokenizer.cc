#include "giant/data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "giant/base/error.h"

namespace giant::data {

SentencePieceTokenizer::SentencePieceTokenizer(std::string spec, const std::string& model_file)
    : spec_(std::move(spec)), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  struct stat st {};
  if (::stat(model_file.c_str(), &st) != 0) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file + "' is not a file");
  }
  const auto status = processor_->Load(model_file);
  if (!status.ok()) {
    throw ConfigError("data.tokenizer", "SentencePiece model '" + model_file +
                                            "' does not load (not a SentencePiece model?): " + status.ToString());
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int64_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

int32_t SentencePieceTokenizer::end_of_document() const {
  const int eos = processor_->eos_id();
  return eos >= 0 && eos < processor_->GetPieceSize() ? eos : -1;
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = processor_->Encode(absl::string_view(text.data(), text.size()), &ids);
  GIANT_CHECK(status.ok(), "SentencePiece tokenizer '", spec_, "': cannot encode: ", status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& tokens) const {
  const int64_t size = vocab_size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    GIANT_CHECK(tokens[i] >= 0 && tokens[i] < size, "SentencePiece tokenizer '", spec_, "': token id ", tokens[i],
                " at position ", i, " is outside the vocabulary [0, ", size, ")");
  }
  std::string text;
  const auto status = processor_->Decode(std::vector<int>(tokens.begin(), tokens.end()), &text);
  GIANT_CHECK(status.ok(), "SentencePiece tokenizer '", spec_, "': cannot decode: ", status.ToString());
  return text;
}

}  // namespace giant::data
