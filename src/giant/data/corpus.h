// A text corpus as token ids, split into training and validation parts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "giant/data/tokenizer.h"

namespace giant::data {

// ConfigError("data.val_fraction") unless val_fraction is in (0, 0.5].
void check_val_fraction(double val_fraction);

struct TokenCorpus {
  std::vector<int32_t> train;
  // The last val_fraction of the tokens (the nearest whole count, a tie going
  // to train): a contiguous tail, so no validation window overlaps a training one.
  std::vector<int32_t> val;

  // Reads and tokenizes the whole file.
  // val_fraction outside (0, 0.5] -> ConfigError("data.val_fraction", ...);
  // missing/unreadable file -> ConfigError("data.path", "... cannot read '<path>': <strerror>");
  // empty file -> ConfigError("data.path", ...).
  static TokenCorpus load(const std::string& path, const Tokenizer& tokenizer, double val_fraction);

  // The same split of tokens already in memory (tests, generated data).
  static TokenCorpus split(std::vector<int32_t> tokens, double val_fraction);
};

}  // namespace giant::data
