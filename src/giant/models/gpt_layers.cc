#include "giant/models/gpt_layers.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "giant/models/attention.h"

namespace giant::models {
namespace {

torch::Tensor maybe_dropout(torch::Tensor x, double p, bool training) {
  return training && p > 0.0 ? torch::dropout(x, p, true) : x;
}

}  // namespace

GptEmbeddingImpl::GptEmbeddingImpl(const GptConfig& config, const parallel::LayerContext& context)
    : dropout_(config.dropout) {
  wte_ = register_parameter(
      "wte", context.normal("wte", {config.padded_vocab(), config.hidden}, config.init_std));
  wpe_ = register_parameter("wpe",
                            context.normal("wpe", {config.seq_len, config.hidden}, config.init_std));
  context.shared().publish("wte", wte_);
}

torch::Tensor GptEmbeddingImpl::forward(torch::Tensor tokens) {
  const int64_t seq = tokens.size(1);
  TORCH_CHECK(seq <= wpe_.size(0), "sequence of ", seq, " tokens is longer than model.seq_len = ",
              wpe_.size(0));
  torch::Tensor x = torch::embedding(wte_, tokens) + wpe_.narrow(0, 0, seq);
  return maybe_dropout(x, dropout_, is_training());
}

GptBlockImpl::GptBlockImpl(const GptConfig& config, const parallel::LayerContext& context)
    : hidden_(config.hidden), heads_(config.heads), dropout_(config.dropout) {
  const int64_t h = config.hidden, f = config.ffn_size();
  const double std = config.init_std;
  // Projections into the residual stream are scaled down by the depth
  // (GPT-2), so the residual's variance does not grow with the layer count.
  const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config.layers));
  ln1_weight_ = register_parameter("ln1_weight", context.ones({h}));
  ln1_bias_ = register_parameter("ln1_bias", context.zeros({h}));
  qkv_weight_ = register_parameter("qkv_weight", context.normal("qkv_weight", {3 * h, h}, std));
  qkv_bias_ = register_parameter("qkv_bias", context.zeros({3 * h}));
  proj_weight_ =
      register_parameter("proj_weight", context.normal("proj_weight", {h, h}, residual_std));
  proj_bias_ = register_parameter("proj_bias", context.zeros({h}));
  ln2_weight_ = register_parameter("ln2_weight", context.ones({h}));
  ln2_bias_ = register_parameter("ln2_bias", context.zeros({h}));
  fc1_weight_ = register_parameter("fc1_weight", context.normal("fc1_weight", {f, h}, std));
  fc1_bias_ = register_parameter("fc1_bias", context.zeros({f}));
  fc2_weight_ =
      register_parameter("fc2_weight", context.normal("fc2_weight", {h, f}, residual_std));
  fc2_bias_ = register_parameter("fc2_bias", context.zeros({h}));
}

torch::Tensor GptBlockImpl::forward(torch::Tensor x) {
  const bool training = is_training();
  torch::Tensor a = torch::layer_norm(x, {hidden_}, ln1_weight_, ln1_bias_, 1e-5);
  a = causal_self_attention(torch::linear(a, qkv_weight_, qkv_bias_), heads_, dropout_, training);
  x = x + maybe_dropout(torch::linear(a, proj_weight_, proj_bias_), dropout_, training);
  torch::Tensor m = torch::layer_norm(x, {hidden_}, ln2_weight_, ln2_bias_, 1e-5);
  m = torch::linear(torch::gelu(torch::linear(m, fc1_weight_, fc1_bias_)), fc2_weight_, fc2_bias_);
  return x + maybe_dropout(m, dropout_, training);
}

GptFinalNormImpl::GptFinalNormImpl(const GptConfig& config, const parallel::LayerContext& context)
    : hidden_(config.hidden) {
  weight_ = register_parameter("weight", context.ones({config.hidden}));
  bias_ = register_parameter("bias", context.zeros({config.hidden}));
}

torch::Tensor GptFinalNormImpl::forward(torch::Tensor x) {
  return torch::layer_norm(x, {hidden_}, weight_, bias_, 1e-5);
}

GptHeadImpl::GptHeadImpl(const GptConfig& config, const parallel::LayerContext& context,
                         int64_t embedding_index)
    : vocab_(config.vocab) {
  if (context.shared().contains("wte")) {
    weight_ = context.shared().get("wte");
  } else {
    owns_weight_ = true;
    weight_ = register_parameter(
        "wte", context.normal_as(embedding_index, "wte", {config.padded_vocab(), config.hidden},
                                 config.init_std));
  }
}

torch::Tensor GptHeadImpl::forward(torch::Tensor x) {
  torch::Tensor logits = torch::linear(x, weight_);
  const int64_t padded = logits.size(-1);
  if (padded > vocab_) {
    // In place on the product's output: its gradient needs only the inputs.
    logits.narrow(-1, vocab_, padded - vocab_).fill_(-std::numeric_limits<double>::infinity());
  }
  return logits;
}

}  // namespace giant::models
