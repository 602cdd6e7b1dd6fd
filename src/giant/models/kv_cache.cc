#include "giant/models/kv_cache.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/models/gpt_layers.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::models {
namespace {

// Layer `index` of `model` as the GPT layer `Impl`, or an error naming what it is.
template <class Impl>
std::shared_ptr<Impl> layer_as(parallel::LayerStack& model, size_t index, const char* expected) {
  auto layer = std::dynamic_pointer_cast<Impl>(model->layer(index).ptr());
  GIANT_CHECK(layer != nullptr, "CachedGpt needs the whole GPT layer stack (embedding, blocks, final norm, head): ",
              "layer ", index, " '", model->layer_name(index), "' is not a ", expected);
  return layer;
}

}  // namespace

at::Tensor cached_self_attention(const at::Tensor& qkv, int64_t heads, int64_t capacity, BlockKeysValues& cache) {
  GIANT_CHECK(qkv.dim() == 3 && qkv.size(2) % (3 * heads) == 0,
              "attention input must be [batch, new, 3 x hidden] with hidden a multiple of ", heads, " heads, got ",
              qkv.sizes());
  const int64_t batch = qkv.size(0), fresh = qkv.size(1), hidden = qkv.size(2) / 3;
  const int64_t head_dim = hidden / heads, past = cache.length, total = past + fresh;
  GIANT_CHECK(total <= capacity, past, " cached and ", fresh, " new positions do not fit in ", capacity);
  if (!cache.keys.defined()) {
    // The whole capacity at once: appending never copies what is cached.
    cache.keys = at::empty({batch * heads, capacity, head_dim}, qkv.options());
    cache.values = at::empty_like(cache.keys);
  }
  GIANT_CHECK(cache.keys.size(0) == batch * heads && cache.keys.size(2) == head_dim &&
                  cache.keys.scalar_type() == qkv.scalar_type(),
              "the cache holds ", cache.keys.sizes(), " ", cache.keys.scalar_type(), ", but the new positions are ",
              qkv.sizes(), " ", qkv.scalar_type(), " over ", heads, " heads");
  // q, k, v as [batch, heads, new, head_dim], as causal_self_attention cuts them.
  const auto parts = qkv.view({batch, fresh, 3, heads, head_dim}).unbind(2);
  auto heads_first = [&](const at::Tensor& part) { return part.transpose(1, 2); };
  auto append = [&](at::Tensor& buffer, const at::Tensor& part) {
    buffer.view({batch, heads, capacity, head_dim}).narrow(2, past, fresh).copy_(heads_first(part));
    return buffer.narrow(1, 0, total);
  };
  const at::Tensor keys = append(cache.keys, parts[1]), values = append(cache.values, parts[2]);
  const at::Tensor q = heads_first(parts[0]).reshape({batch * heads, fresh, head_dim});
  // New position i is position past + i of the sequence: it sees [0, past + i].
  at::Tensor mask = at::full({fresh, total}, -std::numeric_limits<double>::infinity(), qkv.options())
                        .triu_(past + 1)
                        .expand({batch * heads, fresh, total});
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const at::Tensor weights = at::baddbmm(mask, q, keys.transpose(1, 2), 1.0, scale).softmax(-1);
  const at::Tensor out = at::bmm(weights, values);  // [batch * heads, new, head_dim]
  cache.length = total;
  return out.view({batch, heads, fresh, head_dim}).transpose(1, 2).reshape({batch, fresh, hidden});
}

CachedGpt::CachedGpt(parallel::LayerStack model, parallel::TensorParallelGroup tp)
    : model_(std::move(model)), tp_(tp) {
  const size_t layers = model_->size();
  GIANT_CHECK(layers >= 3, "CachedGpt needs the whole GPT layer stack, got ", layers, " layer(s)");
  embedding_ = layer_as<GptEmbeddingImpl>(model_, 0, "GptEmbedding");
  for (size_t i = 1; i + 2 < layers; ++i) block_layers_.push_back(layer_as<GptBlockImpl>(model_, i, "GptBlock"));
  final_norm_ = layer_as<GptFinalNormImpl>(model_, layers - 2, "GptFinalNorm");
  head_ = layer_as<GptHeadImpl>(model_, layers - 1, "GptHead");
  capacity_ = embedding_->positions();
  blocks_.resize(block_layers_.size());
}

void CachedGpt::clear() {
  length_ = 0;
  for (auto& block : blocks_) block.length = 0;  // the buffers stay for the next tokens
}

at::Tensor CachedGpt::extend(const at::Tensor& tokens) {
  GIANT_CHECK(tokens.dim() == 2 && tokens.size(1) >= 1, "CachedGpt::extend takes tokens [batch, n >= 1], got ",
              tokens.sizes());
  const int64_t fresh = tokens.size(1);
  GIANT_CHECK(length_ + fresh <= capacity_, length_, " cached and ", fresh,
              " new tokens are more than model.seq_len = ", capacity_, " positions (clear() and start on a window)");
  torch::NoGradGuard no_grad;
  try {
    const auto device = embedding_->parameters().front().device();
    torch::Tensor x = embedding_->forward_from(tokens.to(device), length_);
    for (size_t b = 0; b < blocks_.size(); ++b) x = block_layers_[b]->forward_cached(x, capacity_, blocks_[b]);
    // Only the last position's logits are wanted: the norm is per position.
    x = final_norm_->forward(x.narrow(1, fresh - 1, 1));
    torch::Tensor logits = head_->forward(x).select(1, 0);
    if (tp_.size > 1) logits = parallel::gather_from_region(logits, *tp_.comm, 1, tp_.comm_seconds);
    length_ += fresh;
    return logits;
  } catch (...) {
    clear();  // some blocks may hold the chunk, others not
    throw;
  }
}

}  // namespace giant::models
