#include "giant/models/gpt_layers.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/models/attention.h"
#include "giant/models/kv_cache.h"
#include "giant/models/layer_norm.h"
#include "giant/models/recompute.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::models {
namespace {

torch::Tensor maybe_dropout(torch::Tensor x, double p, bool training) {
  return training && p > 0.0 ? torch::dropout(x, p, true) : x;
}

}  // namespace

GptEmbeddingImpl::GptEmbeddingImpl(const GptConfig& config, const parallel::LayerContext& context)
    : dropout_(config.dropout) {
  wte_ = register_module("wte", parallel::VocabParallelEmbedding(context, "wte", config.padded_vocab(),
                                                                 config.hidden, config.init_std, "wte"));
  wpe_ = register_parameter("wpe",
                            context.normal("wpe", {config.seq_len, config.hidden}, config.init_std));
}

torch::Tensor GptEmbeddingImpl::forward(torch::Tensor tokens) {
  const int64_t seq = tokens.size(1);
  TORCH_CHECK(seq <= wpe_.size(0), "sequence of ", seq, " tokens is longer than model.seq_len = ",
              wpe_.size(0));
  torch::Tensor x = wte_->forward(tokens) + wpe_.narrow(0, 0, seq);
  return maybe_dropout(x, dropout_, is_training());
}

torch::Tensor GptEmbeddingImpl::forward_from(const torch::Tensor& tokens, int64_t first_position) {
  const int64_t seq = tokens.size(1);
  GIANT_CHECK(first_position >= 0 && first_position + seq <= wpe_.size(0), "positions [", first_position, ", ",
              first_position + seq, ") are past model.seq_len = ", wpe_.size(0));
  return wte_->forward(tokens) + wpe_.narrow(0, first_position, seq);
}

GptBlockImpl::GptBlockImpl(const GptConfig& config, const parallel::LayerContext& context,
                           Recompute recompute)
    : hidden_(config.hidden),
      local_heads_(config.heads / context.tp().size),
      dropout_(config.dropout),
      recompute_(recompute),
      gelu_approximation_(config.activation == Activation::gelu_tanh ? "tanh" : "none") {
  const int64_t h = config.hidden, f = config.ffn_size();
  const double std = config.init_std;
  // Projections into the residual stream are scaled down by the depth
  // (GPT-2), so the residual's variance does not grow with the layer count.
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config.layers));
  ln1_weight_ = register_parameter("ln1_weight", context.ones({h}));
  ln1_bias_ = register_parameter("ln1_bias", context.zeros({h}));
  qkv_ = register_module("qkv", parallel::ColumnParallelLinear(context, "qkv", h, 3 * h, std,
                                                               /*gather_output=*/false, /*stacked=*/3));
  proj_ = register_module("proj", parallel::RowParallelLinear(context, "proj", h, h, residual_std));
  ln2_weight_ = register_parameter("ln2_weight", context.ones({h}));
  ln2_bias_ = register_parameter("ln2_bias", context.zeros({h}));
  fc1_ = register_module("fc1", parallel::ColumnParallelLinear(context, "fc1", h, f, std));
  fc2_ = register_module("fc2", parallel::RowParallelLinear(context, "fc2", f, h, residual_std));
}

torch::Tensor GptBlockImpl::forward(torch::Tensor x) {
  const bool training = is_training();
  if (training && recompute_ == Recompute::full) {
    return recompute([this](const torch::Tensor& input) { return forward_with(input, true, false); }, x);
  }
  return forward_with(x, training, training && recompute_ == Recompute::selective);
}

torch::Tensor GptBlockImpl::forward_with(const torch::Tensor& input, bool training, bool recompute_attention) {
  torch::Tensor a = layer_norm_fp32(input, hidden_, ln1_weight_, ln1_bias_);
  const int64_t heads = local_heads_;
  const double dropout = dropout_;
  auto attention = [heads, dropout, training](const torch::Tensor& qkv) {
    return causal_self_attention(qkv, heads, dropout, training);
  };
  a = recompute_attention ? recompute(attention, qkv_->forward(a)) : attention(qkv_->forward(a));
  torch::Tensor x = input + maybe_dropout(proj_->forward(a), dropout_, training);
  return x + maybe_dropout(mlp(x), dropout_, training);
}

torch::Tensor GptBlockImpl::forward_cached(torch::Tensor x, int64_t capacity, BlockKeysValues& cache) {
  torch::Tensor a = layer_norm_fp32(x, hidden_, ln1_weight_, ln1_bias_);
  a = cached_self_attention(qkv_->forward(a), local_heads_, capacity, cache);
  x = x + proj_->forward(a);
  return x + mlp(x);
}

torch::Tensor GptBlockImpl::mlp(const torch::Tensor& x) {
  torch::Tensor m = layer_norm_fp32(x, hidden_, ln2_weight_, ln2_bias_);
  return fc2_->forward(torch::gelu(fc1_->forward(m), gelu_approximation_));
}

GptFinalNormImpl::GptFinalNormImpl(const GptConfig& config, const parallel::LayerContext& context)
    : hidden_(config.hidden) {
  weight_ = register_parameter("weight", context.ones({config.hidden}));
  bias_ = register_parameter("bias", context.zeros({config.hidden}));
}

torch::Tensor GptFinalNormImpl::forward(torch::Tensor x) {
  return layer_norm_fp32(x, hidden_, weight_, bias_);
}

GptHeadImpl::GptHeadImpl(const GptConfig& config, const parallel::LayerContext& context,
                         int64_t embedding_index)
    : vocab_(config.vocab), tp_(context.tp()) {
  if (context.shared().contains("wte")) {
    weight_ = context.shared().get("wte");
  } else {
    owns_weight_ = true;
    weight_ = register_parameter(
        "tp_wte", parallel::shard_rows(context.normal_as(embedding_index, "wte",
                                                         {config.padded_vocab(), config.hidden},
                                                         config.init_std),
                                       tp_.rank, tp_.size));
  }
}

torch::Tensor GptHeadImpl::forward(torch::Tensor x) {
  if (tp_.size > 1) x = parallel::copy_to_region(x, *tp_.comm, tp_.comm_seconds);
  torch::Tensor logits = torch::linear(x, weight_);
  // This rank's columns are [first, first + local) of the padded vocabulary.
  const int64_t local = logits.size(-1), first = tp_.rank * local;
  const int64_t padding_from = std::max<int64_t>(vocab_ - first, 0);
  if (padding_from < local) {
    // In place on the product's output: its gradient needs only the inputs.
    logits.narrow(-1, padding_from, local - padding_from).fill_(-std::numeric_limits<double>::infinity());
  }
  return logits;
}

}  // namespace giant::models
