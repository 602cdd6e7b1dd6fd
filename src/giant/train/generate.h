// Text from a trained model: sampling one token at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <ATen/core/Tensor.h>

#include "giant/data/tokenizer.h"
#include "giant/parallel/layer_list.h"

namespace giant::train {

struct SampleOptions {
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t vocab = 256;    // logits beyond this (padding) are never sampled
  int64_t seq_len = 128;  // context kept (the model's position table)
  uint64_t seed = 0;
};

// The prompt followed by `tokens` sampled tokens, decoded. `next_logits`
// maps a context [1, n] (int64) to the logits of the token after it (the
// whole padded vocabulary, fp32 or any dtype); every rank that calls it
// with the same logits draws the same tokens.
using NextLogits = std::function<at::Tensor(const at::Tensor& context)>;
std::string generate_text(const NextLogits& next_logits, const data::Tokenizer& tokenizer,
                          const SampleOptions& options);

// The next-token logits of a whole model on this rank. Under tensor
// parallelism every rank of the group calls it (the logits are gathered).
NextLogits model_next_logits(parallel::LayerStack model, const parallel::TensorParallelGroup& tp = {});

}  // namespace giant::train
