// GPT as a layer list: embedding, blocks, final norm, tied head.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

#include "giant/layout/layout.h"
#include "giant/models/gpt_config.h"
#include "giant/parallel/layer_list.h"

namespace giant::models {

// "embedding", "block.0" ... "block.{L-1}", "final_norm", "head"; the
// blocks recompute activations in training as `recompute` says.
parallel::LayerList gpt_layer_list(const GptConfig& config,
                                   Recompute recompute = Recompute::none);

// The token embedding's weight, held by the embedding, and the head's copy
// of it when the head is built in another process (another pipeline stage).
struct TiedWeightNames {
  std::string owner = "embedding.wte.tp_weight";
  std::string copy = "head.tp_wte";
};

// Mean cross entropy of logits [batch, seq, padded vocab / tp] against
// targets [batch, seq] (int64), in nats per token; vocabulary-parallel over tp.
at::Tensor gpt_loss(const at::Tensor& logits, const at::Tensor& targets,
                    const parallel::TensorParallelGroup& tp = {});

// ConfigError naming the key when the model does not split over tp ranks
// (heads, MLP width, padded vocabulary).
void check_tensor_parallel(const GptConfig& config, int tp);

}  // namespace giant::models
