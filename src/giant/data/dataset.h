// Where a run's samples come from: data.path (a text file, tokenized in
// memory as before, or a Megatron .bin/.idx prefix, memory-mapped) or
// data.paths (several prefixes blended by weight). Either way a split
// answers "the seq_len + 1 tokens of global sample i", in an order that
// depends only on the seed: never on dp, nor on who asks in what order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "giant/data/tokenizer.h"

namespace giant::data {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Global sample `index` (>= 0) of this split: seq_len + 1 ids into tokens.
  virtual void sample(int64_t index, int32_t* tokens) const = 0;
  virtual int64_t num_tokens() const = 0;  // in this split, over every source
};

struct DatasetOptions {
  std::string path;                // data.path
  std::vector<std::string> paths;  // data.paths: ["weight", "prefix", ...]; when set, path is unused
  double val_fraction = 0.05;
  int64_t seq_len = 0;
  uint64_t seed = 0;
  int64_t vocab = 0;  // model.vocab: a stored id at or above it is an error naming the file
};

struct Datasets {
  std::unique_ptr<SampleSource> train, validation;
  std::string description;  // one line for the log: sources, documents, tokens per split
};

// The text file's validation split is its tail (val_fraction of the tokens);
// a prefix's is its last whole documents holding the nearest share of the
// tokens (at least one document each side). Errors, before any training:
// ConfigError naming data.path / data.paths / data.val_fraction / model.seq_len,
// FormatError naming a corrupt .idx or .bin and its field.
Datasets open_datasets(const DatasetOptions& options, const Tokenizer& tokenizer);

// True when `path` names an indexed dataset: PATH.idx exists, or PATH ends
// in .idx or .bin (the prefix is PATH without it).
bool is_indexed_dataset(const std::string& path);
std::string indexed_dataset_prefix(const std::string& path);

}  // namespace giant::data
