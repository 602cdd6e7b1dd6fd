// Incremental inference of a GPT: the layer stack run one chunk of new tokens
// at a time, each block's attention keys and values kept from the chunks
// before, so a token costs one position's work instead of the whole
// context's. The training forward (GptBlockImpl::forward) is untouched.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/parallel/layer_list.h"

namespace giant::models {

class GptEmbeddingImpl;  // gpt_layers.h
class GptBlockImpl;
class GptFinalNormImpl;
class GptHeadImpl;

// One block's keys and values for positions [0, length): each
// [batch * local heads, capacity, head_dim], allocated at the first chunk.
struct BlockKeysValues {
  at::Tensor keys, values;
  int64_t length = 0;
};

// Causal attention of a chunk of new positions over the cached ones and
// themselves. qkv: [batch, new, 3 * local hidden] as the block's projection
// gives it; its keys and values are appended to `cache` at positions
// [length, length + new), which must fit in `capacity`. Returns
// [batch, new, local hidden], what causal_self_attention gives for those
// positions of the whole sequence.
at::Tensor cached_self_attention(const at::Tensor& qkv, int64_t heads, int64_t capacity, BlockKeysValues& cache);

// The GPT layer stack gpt_layer_list builds (embedding, blocks, final norm,
// head; whole, or this rank's heads and vocabulary under tensor
// parallelism, every rank of the group calling alike), run with a cache.
// Positions continue from the cached tokens up to model.seq_len (the
// position table); past it the caller starts again on a window (clear()).
// Expects the stack's parameters in place (no pending ZeRO gathers).
class CachedGpt {
 public:
  explicit CachedGpt(parallel::LayerStack model, parallel::TensorParallelGroup tp = {});

  // tokens [batch, n] (int64, n >= 1) following the cached ones; returns the
  // logits of the last new position, [batch, padded vocabulary] (gathered
  // over tp), in the model's dtype. No autograd.
  at::Tensor extend(const at::Tensor& tokens);
  void clear();                                // forget every cached position
  int64_t length() const { return length_; }   // positions cached
  int64_t capacity() const { return capacity_; }  // model.seq_len

 private:
  parallel::LayerStack model_;
  // Its layers, typed.
  std::shared_ptr<GptEmbeddingImpl> embedding_;
  std::vector<std::shared_ptr<GptBlockImpl>> block_layers_;
  std::shared_ptr<GptFinalNormImpl> final_norm_;
  std::shared_ptr<GptHeadImpl> head_;
  parallel::TensorParallelGroup tp_;
  int64_t capacity_ = 0;
  int64_t length_ = 0;
  std::vector<BlockKeysValues> blocks_;
};

}  // namespace giant::models
