#include "giant/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "giant/base/error.h"
#include "giant/data/blend.h"
#include "giant/data/corpus.h"
#include "giant/data/gpt_samples.h"
#include "giant/data/indexed_dataset.h"
#include "giant/data/sampler.h"

namespace giant::data {
namespace {

// Validation draws from its own order, so it never depends on training length.
constexpr uint64_t kValidationSeedOffset = 0x5eed0001;

uint64_t split_seed(uint64_t seed, size_t source, bool validation) {
  return seed + (validation ? kValidationSeedOffset : 0) + source * 0x9e3779b97f4a7c15ULL;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A text file, tokenized in memory: windows at uniform offsets (SequenceSampler).
class TextSamples final : public SampleSource {
 public:
  TextSamples(std::vector<int32_t> tokens, int64_t seq_len, uint64_t seed, const char* split)
      : tokens_(std::move(tokens)), sampler_(static_cast<int64_t>(tokens_.size()), seq_len, seed, split) {}
  void sample(int64_t index, int32_t* tokens) const override { sampler_.window(tokens_, index, tokens); }
  int64_t num_tokens() const override { return static_cast<int64_t>(tokens_.size()); }

 private:
  std::vector<int32_t> tokens_;
  SequenceSampler sampler_;
};

// Tokens [first, first + count) of an indexed dataset: whole documents.
class IndexedSamples final : public SampleSource {
 public:
  IndexedSamples(std::shared_ptr<const IndexedDataset> data, int64_t first, int64_t count, int64_t seq_len,
                 uint64_t seed, int64_t vocab, const std::string& what)
      : data_(std::move(data)), first_(first), count_(count), seq_len_(seq_len), vocab_(vocab),
        order_(count, seq_len, seed, what) {}
  void sample(int64_t index, int32_t* tokens) const override {
    const int64_t start = first_ + order_.start(index);
    data_->read(start, seq_len_ + 1, tokens);
    for (int64_t t = 0; t <= seq_len_; ++t) {
      if (tokens[t] < 0 || tokens[t] >= vocab_) {
        throw ConfigError("model.vocab", detail::concat("is ", vocab_, " but ", data_->prefix(), ".bin holds id ",
                                                        tokens[t], " at token ", start + t,
                                                        " (prepared with another tokenizer?)"));
      }
    }
  }
  int64_t num_tokens() const override { return count_; }

 private:
  std::shared_ptr<const IndexedDataset> data_;
  int64_t first_, count_, seq_len_, vocab_;
  GptSampleOrder order_;
};

class BlendedSamples final : public SampleSource {
 public:
  BlendedSamples(std::vector<std::unique_ptr<SampleSource>> sources, std::vector<double> weights)
      : sources_(std::move(sources)), order_(std::move(weights)) {}
  void sample(int64_t index, int32_t* tokens) const override {
    const BlendOrder::Pick pick = order_.at(index);
    sources_[static_cast<size_t>(pick.source)]->sample(pick.index, tokens);
  }
  int64_t num_tokens() const override {
    int64_t total = 0;
    for (const auto& s : sources_) total += s->num_tokens();
    return total;
  }

 private:
  std::vector<std::unique_ptr<SampleSource>> sources_;
  BlendOrder order_;
};

// The first validation document: the document boundary nearest to where the
// last val_fraction of the tokens starts, leaving at least one document each side.
int64_t first_validation_document(const IndexedDataset& data, double val_fraction, const std::string& key) {
  const int64_t documents = data.num_documents();
  if (documents < 2) {
    throw ConfigError(key, detail::concat(data.prefix(), " has ", documents,
                                          " document(s); the validation split takes whole documents, so it "
                                          "needs at least 2"));
  }
  const double target = static_cast<double>(data.num_tokens()) * (1.0 - val_fraction);
  int64_t lo = 1, hi = documents - 1;  // the first document_start(b) >= target, within [1, documents - 1]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<double>(data.document_start(mid)) < target) lo = mid + 1; else hi = mid;
  }
  if (lo > 1 && target - static_cast<double>(data.document_start(lo - 1)) <
                    static_cast<double>(data.document_start(lo)) - target) {
    --lo;
  }
  return lo;
}

// ConfigError naming `key` unless the prefix `path` names (its .bin or .idx
// taken off) has both files: what a prefix needs and how to make one.
void require_prefix_files(const std::string& path, const std::string& key) {
  const std::string prefix = indexed_dataset_prefix(path);
  std::string missing;
  for (const char* extension : {".bin", ".idx"}) {
    std::error_code ignored;
    if (std::filesystem::is_regular_file(prefix + extension, ignored)) continue;
    missing += (missing.empty() ? "" : " nor ") + prefix + extension;
  }
  if (missing.empty()) return;
  std::error_code ignored;
  const bool text_named_like_a_prefix = path != prefix && std::filesystem::is_regular_file(path, ignored);
  throw ConfigError(key, "'" + path + "' names the .bin/.idx prefix '" + prefix + "', but there is no file " +
                             missing + ": a prefix needs both " + prefix + ".bin and " + prefix +
                             ".idx, as giant data prepare --input FILE --tokenizer SPEC --output " + prefix +
                             " writes them" +
                             (text_named_like_a_prefix
                                  ? " (a text file to train on directly must not end in .bin or .idx)"
                                  : ""));
}

struct IndexedSplits {
  std::unique_ptr<SampleSource> train, validation;
  std::string description;
};

IndexedSplits open_indexed(const std::string& prefix, const DatasetOptions& o, size_t source, const std::string& key) {
  std::shared_ptr<const IndexedDataset> data = IndexedDataset::open(prefix);
  const int64_t boundary = first_validation_document(*data, o.val_fraction, key);
  const int64_t split_token = data->document_start(boundary);
  IndexedSplits s;
  s.train = std::make_unique<IndexedSamples>(data, 0, split_token, o.seq_len, split_seed(o.seed, source, false),
                                             o.vocab, prefix + "'s training split");
  s.validation = std::make_unique<IndexedSamples>(data, split_token, data->num_tokens() - split_token, o.seq_len,
                                                  split_seed(o.seed, source, true), o.vocab,
                                                  prefix + "'s validation split");
  std::ostringstream d;
  d << prefix << " (.bin/.idx): " << split_token << " train tokens in " << boundary << " documents, "
    << data->num_tokens() - split_token << " validation tokens in " << data->num_documents() - boundary;
  s.description = d.str();
  return s;
}

double parse_weight(const std::string& text) {
  char* end = nullptr;
  const double w = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(w) || !(w > 0)) {
    throw ConfigError("data.paths", "expects [\"weight\", \"prefix\", ...] with positive weights (Megatron's "
                                    "form), got weight '" + text + "'");
  }
  return w;
}

Datasets open_blend(const DatasetOptions& o) {
  if (o.paths.size() % 2 != 0) {
    throw ConfigError("data.paths", detail::concat("expects [\"weight\", \"prefix\", ...] pairs (Megatron's form), "
                                                   "got ", o.paths.size(), " items"));
  }
  std::vector<std::unique_ptr<SampleSource>> train, validation;
  std::vector<double> weights;
  std::ostringstream d;
  d << "blend of " << o.paths.size() / 2;
  for (size_t i = 0; i < o.paths.size(); i += 2) {
    weights.push_back(parse_weight(o.paths[i]));
    const std::string& path = o.paths[i + 1];
    require_prefix_files(path, "data.paths");
    IndexedSplits s = open_indexed(indexed_dataset_prefix(path), o, i / 2, "data.paths");
    train.push_back(std::move(s.train));
    validation.push_back(std::move(s.validation));
    d << (i == 0 ? ": " : "; ") << o.paths[i] << " x " << s.description;
  }
  Datasets result;
  result.train = std::make_unique<BlendedSamples>(std::move(train), weights);
  result.validation = std::make_unique<BlendedSamples>(std::move(validation), weights);
  result.description = d.str();
  return result;
}

}  // namespace

bool is_indexed_dataset(const std::string& path) {
  if (ends_with(path, ".idx") || ends_with(path, ".bin")) return true;
  std::error_code ignored;
  return std::filesystem::exists(path + ".idx", ignored);
}

std::string indexed_dataset_prefix(const std::string& path) {
  if (ends_with(path, ".idx") || ends_with(path, ".bin")) return path.substr(0, path.size() - 4);
  return path;
}

Datasets open_datasets(const DatasetOptions& o, const Tokenizer& tokenizer) {
  check_val_fraction(o.val_fraction);
  if (!o.paths.empty()) return open_blend(o);
  if (is_indexed_dataset(o.path)) {
    require_prefix_files(o.path, "data.path");
    IndexedSplits s = open_indexed(indexed_dataset_prefix(o.path), o, 0, "data.path");
    return Datasets{std::move(s.train), std::move(s.validation), s.description};
  }
  TokenCorpus corpus = TokenCorpus::load(o.path, tokenizer, o.val_fraction);
  std::ostringstream d;
  d << o.path << ": " << corpus.train.size() << " train and " << corpus.val.size() << " validation tokens";
  Datasets result;
  result.train = std::make_unique<TextSamples>(std::move(corpus.train), o.seq_len, split_seed(o.seed, 0, false), "train");
  result.validation =
      std::make_unique<TextSamples>(std::move(corpus.val), o.seq_len, split_seed(o.seed, 0, true), "validation");
  result.description = d.str();
  return result;
}

}  // namespace giant::data
