#include "giant/data/sampler.h"

#include <algorithm>
#include <utility>

#include "giant/base/error.h"
#include "giant/base/hash.h"

namespace giant::data {
namespace {

// Attempt `attempt` of sample `index`: chained so that nearby seeds and
// indices give unrelated values. The sample order is part of a run's
// reproducibility: changing this changes which windows every seed picks.
uint64_t draw(uint64_t seed, uint64_t index, uint64_t attempt) {
  return splitmix64(splitmix64(splitmix64(seed) ^ index) ^ attempt);
}

}  // namespace

SequenceSampler::SequenceSampler(int64_t num_tokens, int64_t seq_len, uint64_t seed,
                                 std::string split_name)
    : num_tokens_(num_tokens), seq_len_(seq_len), seed_(seed), split_name_(std::move(split_name)) {
  if (seq_len_ < 1) {
    throw ConfigError("model.seq_len", detail::concat("must be at least 1, got ", seq_len_));
  }
  // Each sample needs seq_len inputs plus one more token for the last target.
  if (num_tokens_ < seq_len_ + 1) {
    throw ConfigError("model.seq_len",
                      detail::concat(seq_len_, " is larger than the data allows: ", split_name_,
                                     " has ", num_tokens_, " tokens, needs at least seq_len+1 = ",
                                     seq_len_ + 1));
  }
}

int64_t SequenceSampler::start(int64_t index) const {
  GIANT_CHECK(index >= 0, "sample index must be >= 0, got ", index);
  auto range = static_cast<uint64_t>(num_tokens_ - seq_len_);  // >= 1 by the constructor
  // Rejection keeps the offsets exactly uniform: accept only draws below the
  // largest multiple of range. (-range) % range == 2^64 mod range. Rejections
  // are rarer than range / 2^64, and each retry is a fresh counter.
  uint64_t limit = ~uint64_t{0} - (-range) % range;  // largest accepted draw
  for (uint64_t attempt = 0;; ++attempt) {
    uint64_t x = draw(seed_, static_cast<uint64_t>(index), attempt);
    if (x <= limit) return static_cast<int64_t>(x % range);
  }
}

void SequenceSampler::window(const std::vector<int32_t>& tokens, int64_t index, int32_t* window) const {
  GIANT_CHECK(static_cast<int64_t>(tokens.size()) == num_tokens_, "sampler for ", split_name_,
              " was built for ", num_tokens_, " tokens, got ", tokens.size());
  const int32_t* first = tokens.data() + start(index);
  std::copy(first, first + seq_len_ + 1, window);
}

}  // namespace giant::data
