// Rounding bounds for a GPT forward computed in pieces (support/rounding.h's
// model): shared by the key-value cache tests of models/ and the generation
// tests of train/.
#pragma once

#include <cstdint>

#include "giant/models/gpt_config.h"
#include "support/rounding.h"

namespace giant::test {

// How far a forward over a chunk of positions with a key-value cache may be
// from the whole sequence's forward (relative norm of the logits): the
// chunk's products have other shapes, so the kernel may accumulate each in
// another order, up to k roundings per element in each run. Per block: qkv,
// the projection and the first MLP layer (k = hidden), the attention scores
// (k = head_dim), the weighted values (k = the positions so far, at most
// seq_len) and the second MLP layer (k = ffn); then the head (k = hidden).
inline double cached_forward_bound(const models::GptConfig& c, double u) {
  const int64_t per_block = 3 * c.hidden + c.head_dim() + c.seq_len + c.ffn_size();
  return RoundingBudget().add(static_cast<double>(2 * (c.layers * per_block + c.hidden)), u).bound();
}

// Attention alone computed two ways (on the same qkv, in other orders or
// with a cache): scores (k = head_dim) and weighted values (k = positions).
inline double attention_bound(int64_t head_dim, int64_t positions, double u) {
  return RoundingBudget().add(static_cast<double>(2 * (head_dim + positions)), u).bound();
}

}  // namespace giant::test
