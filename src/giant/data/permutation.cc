#include "giant/data/permutation.h"

#include "giant/base/error.h"
#include "giant/base/hash.h"

namespace giant::data {

IndexPermutation::IndexPermutation(uint64_t n, uint64_t key) : n_(n) {
  GIANT_CHECK(n >= 1, "a permutation needs at least one element");
  // A balanced Feistel network on 2 x half_bits >= log2(n) bits; cycle-walking
  // maps the values >= n back into range. Since 2^(2 half_bits) < 4n, a walk
  // takes fewer than 4 rounds on average.
  half_bits_ = 1;
  while (half_bits_ < 32 && (uint64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = splitmix64(key ^ 0x7065726d75746531ULL);  // "permute1"
  for (auto& round_key : round_keys_) round_key = k = splitmix64(k);
}

uint64_t IndexPermutation::feistel(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (uint64_t round_key : round_keys_) {
    const uint64_t next = left ^ (splitmix64(right ^ round_key) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t IndexPermutation::operator()(uint64_t i) const {
  GIANT_CHECK(i < n_, "permutation index ", i, " is outside [0, ", n_, ")");
  uint64_t x = feistel(i);
  while (x >= n_) x = feistel(x);  // a bijection on [0, 2^bits) restricted to [0, n) by walking its cycle
  return x;
}

}  // namespace giant::data
