// The global sample order. Sample `index` (0, 1, 2, ...) is the window of
// seq_len + 1 tokens starting at start(index), which depends only on
// (seed, index): a counter-based hash, no generator state. So the order is
// the same whoever asks, in whatever order, and a data-parallel rank takes a
// slice of it (indices [r*k, (r+1)*k) of each step's global batch) without
// changing what the model sees as a whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace giant::data {

class SequenceSampler {
 public:
  // num_tokens < seq_len + 1 -> ConfigError("model.seq_len", "... is larger than
  // the data allows: <split_name> has N tokens, needs at least seq_len+1");
  // seq_len < 1 -> ConfigError("model.seq_len", ...). split_name ("train",
  // "validation") is used only in messages.
  SequenceSampler(int64_t num_tokens, int64_t seq_len, uint64_t seed, std::string split_name);

  // Uniform over [0, num_tokens - seq_len - 1]; index >= 0.
  int64_t start(int64_t index) const;

  // Copies sample `index`'s seq_len + 1 ids, tokens[start(index) ...], into
  // window. tokens must hold num_tokens ids.
  void window(const std::vector<int32_t>& tokens, int64_t index, int32_t* window) const;

  int64_t seq_len() const { return seq_len_; }
  int64_t num_tokens() const { return num_tokens_; }
  uint64_t seed() const { return seed_; }
  const std::string& split_name() const { return split_name_; }

 private:
  int64_t num_tokens_;
  int64_t seq_len_;
  uint64_t seed_;
  std::string split_name_;
};

}  // namespace giant::data
