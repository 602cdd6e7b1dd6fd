// Causal multi-head self-attention, in one function.
#pragma once

#include <ATen/core/Tensor.h>

namespace giant::models {

// qkv: [batch, seq, 3 * hidden] (queries, keys, values side by side, each
// split into `heads` heads of hidden / heads). Returns [batch, seq, hidden].
// Dropout applies to the attention weights when training and p > 0.
at::Tensor causal_self_attention(const at::Tensor& qkv, int64_t heads, double dropout,
                                 bool training);

}  // namespace giant::models
