// The GPT samples of a stretch of tokens (one split of one corpus, documents
// back to back with their end-of-document ids): the stretch is cut into
// samples of seq_len + 1 tokens that overlap by one (sample k starts at
// k x seq_len), so an epoch sees every token once as an input and once as a
// target, and samples run across document boundaries. Each epoch visits its
// samples in its own pseudo-random order keyed by (seed, epoch); sample
// `index` of the whole order is in epoch index / samples_per_epoch(), and
// there are as many epochs as a run asks for. Nothing is stored per sample.
#pragma once

#include <cstdint>
#include <string>

namespace giant::data {

class GptSampleOrder {
 public:
  // num_tokens < seq_len + 1 -> ConfigError("model.seq_len", "... is larger than the
  // data allows: <what> has N tokens, needs at least seq_len+1"); seq_len < 1 likewise.
  GptSampleOrder(int64_t num_tokens, int64_t seq_len, uint64_t seed, const std::string& what);

  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  // The first token of sample `index` (>= 0) within the stretch.
  int64_t start(int64_t index) const;

 private:
  int64_t seq_len_, samples_per_epoch_;
  uint64_t seed_;
};

}  // namespace giant::data
