#include "giant/data/gpt_samples.h"

#include "giant/base/error.h"
#include "giant/base/hash.h"
#include "giant/data/permutation.h"

namespace giant::data {

GptSampleOrder::GptSampleOrder(int64_t num_tokens, int64_t seq_len, uint64_t seed, const std::string& what)
    : seq_len_(seq_len), seed_(seed) {
  if (seq_len < 1) throw ConfigError("model.seq_len", detail::concat("must be at least 1, got ", seq_len));
  if (num_tokens < seq_len + 1) {
    throw ConfigError("model.seq_len",
                      detail::concat(seq_len, " is larger than the data allows: ", what, " has ", num_tokens,
                                     " tokens, needs at least seq_len+1 = ", seq_len + 1));
  }
  samples_per_epoch_ = (num_tokens - 1) / seq_len;
}

int64_t GptSampleOrder::start(int64_t index) const {
  GIANT_CHECK(index >= 0, "sample index must be >= 0, got ", index);
  const auto epoch = static_cast<uint64_t>(index / samples_per_epoch_);
  const auto position = static_cast<uint64_t>(index % samples_per_epoch_);
  // A permutation object is a few words: building one per call costs less than the sample's copy.
  const IndexPermutation order(static_cast<uint64_t>(samples_per_epoch_), splitmix64(seed_) ^ splitmix64(~epoch));
  return static_cast<int64_t>(order(position)) * seq_len_;
}

}  // namespace giant::data
