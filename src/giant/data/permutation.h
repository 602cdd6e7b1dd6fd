// A pseudo-random bijection of [0, n) computed on the fly: the sample order of
// an epoch without an array of n indices, so a rank's memory does not grow
// with the corpus.
#pragma once

#include <array>
#include <cstdint>

namespace giant::data {

class IndexPermutation {
 public:
  // n >= 1. The same (n, key) gives the same permutation on every platform.
  IndexPermutation(uint64_t n, uint64_t key);

  // The image of i; i < n (GIANT_CHECK).
  uint64_t operator()(uint64_t i) const;
  uint64_t size() const { return n_; }

 private:
  static constexpr int kRounds = 6;
  uint64_t feistel(uint64_t x) const;

  uint64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  std::array<uint64_t, kRounds> round_keys_{};
};

}  // namespace giant::data
