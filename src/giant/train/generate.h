// Text from a trained model: sampling one token at a time.
#pragma once

#include <cstdint>
#include <string>

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

// The prompt followed by `tokens` sampled tokens, decoded. Leaves the model
// in the mode it was in. Under tensor parallelism every rank of the group
// calls it (the logits are gathered) and gets the same text.
std::string generate_text(parallel::LayerStack& model, const data::Tokenizer& tokenizer,
                          const SampleOptions& options, const parallel::TensorParallelGroup& tp = {});

}  // namespace giant::train
