// The layers of a GPT, each a module with a tensor-to-tensor forward, built
// by the layer list from a LayerContext (seeded weights, shared weights).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "giant/layout/layout.h"
#include "giant/models/gpt_config.h"
#include "giant/parallel/layer_list.h"
#include "giant/parallel/tensor_parallel/layers.h"

namespace giant::models {

struct BlockKeysValues;  // kv_cache.h

// Token ids [batch, seq] (int64) -> token plus learned position embedding
// [batch, seq, hidden]. Owns the token embedding (vocabulary-parallel over
// tp), published as "wte" for the tied head.
class GptEmbeddingImpl : public torch::nn::Module {
 public:
  GptEmbeddingImpl(const GptConfig& config, const parallel::LayerContext& context);
  torch::Tensor forward(torch::Tensor tokens);
  // The tokens at positions [first_position, first_position + seq) (a
  // chunk of incremental inference), without dropout.
  torch::Tensor forward_from(const torch::Tensor& tokens, int64_t first_position);
  int64_t positions() const { return wpe_.size(0); }  // model.seq_len

 private:
  double dropout_;
  parallel::VocabParallelEmbedding wte_{nullptr};
  torch::Tensor wpe_;
};
TORCH_MODULE(GptEmbedding);

// Pre-LayerNorm block: x + attention(ln1(x)), then x + mlp(ln2(x)), the
// MLP's nonlinearity as model.activation says. Over tp, the heads and the
// MLP's width are split (column- then row-parallel), one reduction per half
// in each direction.
//
// `recompute` (train.recompute) trades compute for activation memory in
// training: full keeps only the block's input and runs the whole forward
// again in backward; selective keeps the projections' and MLP's activations
// and recomputes only the attention core (softmax(q k^T / sqrt(d)) v and its
// dropout, the s^2 part). The recomputation stays inside forward's own
// graph node, so hooks on the block's output gradient run before it.
class GptBlockImpl : public torch::nn::Module {
 public:
  GptBlockImpl(const GptConfig& config, const parallel::LayerContext& context,
               Recompute recompute = Recompute::none);
  torch::Tensor forward(torch::Tensor x);
  // A chunk of new positions after those in `cache` (which it extends), as
  // forward computes them in the whole sequence; without dropout.
  torch::Tensor forward_cached(torch::Tensor x, int64_t capacity, BlockKeysValues& cache);

 private:
  torch::Tensor mlp(const torch::Tensor& x);  // fc2(activation(fc1(ln2(x))))
  // The block as forward computes it, with `recompute_attention` choosing
  // selective recomputation of the attention core.
  torch::Tensor forward_with(const torch::Tensor& x, bool training, bool recompute_attention);

  int64_t hidden_, local_heads_;
  double dropout_;
  Recompute recompute_;
  const char* gelu_approximation_;  // torch::gelu's: "none" (erf) or "tanh"
  torch::Tensor ln1_weight_, ln1_bias_, ln2_weight_, ln2_bias_;
  parallel::ColumnParallelLinear qkv_{nullptr}, fc1_{nullptr};
  parallel::RowParallelLinear proj_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(GptBlock);

class GptFinalNormImpl : public torch::nn::Module {
 public:
  GptFinalNormImpl(const GptConfig& config, const parallel::LayerContext& context);
  torch::Tensor forward(torch::Tensor x);

 private:
  int64_t hidden_;
  torch::Tensor weight_, bias_;
};
TORCH_MODULE(GptFinalNorm);

// [batch, seq, hidden] -> logits [batch, seq, padded vocab / tp] against the
// token embedding (this rank's vocabulary slice). Logits of the padding
// entries are -inf: padding is never predicted. Uses the embedding's weight
// when it is built in the same process, else holds its own copy drawn as the
// embedding draws it.
class GptHeadImpl : public torch::nn::Module, public parallel::DeclaresTensorSplits {
 public:
  GptHeadImpl(const GptConfig& config, const parallel::LayerContext& context,
              int64_t embedding_index);
  torch::Tensor forward(torch::Tensor x);
  bool owns_weight() const { return owns_weight_; }
  std::map<std::string, parallel::TensorSplit> own_tensor_splits() const override {
    if (!owns_weight_) return {};
    return {{"tp_wte", {0, 1}}};
  }

 private:
  int64_t vocab_;
  parallel::TensorParallelGroup tp_;
  bool owns_weight_ = false;
  torch::Tensor weight_;
};
TORCH_MODULE(GptHead);

}  // namespace giant::models
