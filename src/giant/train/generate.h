// Text from a trained model: sampling one token at a time, from a model with
// a key-value cache or from any next-token function (a pipeline's).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/data/tokenizer.h"
#include "giant/parallel/layer_list.h"

namespace giant::train {

struct SampleOptions {
  std::string prompt;     // empty: start from a newline
  int64_t tokens = 200;   // new tokens
  double temperature = 0.8;  // 0: greedy, the most likely token each time
  int64_t top_k = 0;      // > 0: draw among the k most likely tokens only
  double top_p = 1.0;     // < 1: draw among the fewest most likely tokens whose probability reaches it
  int64_t vocab = 256;    // logits beyond this (padding) are never sampled
  int64_t seq_len = 128;  // context kept (the model's position table)
  uint64_t seed = 0;      // of the generator the draws take: the same seed, the same text
};

// The logits of the token after `tokens` (every token so far, prompt
// included): the whole padded vocabulary, any dtype. Every rank that gets
// the same logits draws the same tokens.
using ContextLogits = std::function<at::Tensor(const std::vector<int32_t>& tokens)>;

// Called with each new token's text as it is made: only whole UTF-8
// characters (a byte-level model may emit one over several tokens), what is
// left at the end in one last call. The calls concatenate to the decoded
// new tokens.
using OnText = std::function<void(std::string_view text)>;

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;
  double prefill_s = 0;  // the prompt's logits: the first token
  double decode_s = 0;   // every token after the first
};

struct Generation {
  std::vector<int32_t> tokens;  // the prompt's, then the new ones
  std::string text;             // all of them decoded
  GenerationStats stats;
};

// The sampling loop: the prompt, then options.tokens tokens drawn from
// `logits` (greedy, or at options.temperature within top_k and top_p).
// Options out of range (a negative temperature, top_k or token count, top_p
// outside (0, 1]) are a giant::Error: callers check their users' input.
Generation generate(const ContextLogits& logits, const data::Tokenizer& tokenizer, const SampleOptions& options,
                    const OnText& on_text = {});

// The token drawn from one position's logits (the padded vocabulary).
int64_t sample_token(const at::Tensor& logits, const SampleOptions& options, at::Generator& generator);

// The next-token logits of a context [1, n] (int64, n <= seq_len) of the
// token after it, as a pipeline computes them.
using NextLogits = std::function<at::Tensor(const at::Tensor& context)>;

// `next_logits` on the last seq_len tokens each time: no cache.
ContextLogits windowed_logits(NextLogits next_logits, int64_t seq_len);

// A whole GPT layer stack run with a key-value cache (models::CachedGpt):
// the prompt once, then one token per step. Past model.seq_len the context
// is the last seq_len tokens, whose positions all shift by one each step, so
// the window is prefilled again each step: the same logits as without a
// cache, at its cost. Under tensor parallelism every rank of the group calls
// it (each caches its own heads; the logits are gathered).
ContextLogits cached_model_logits(parallel::LayerStack model, const parallel::TensorParallelGroup& tp = {});

// The same without a cache: the whole window each step.
NextLogits model_next_logits(parallel::LayerStack model, const parallel::TensorParallelGroup& tp = {});

}  // namespace giant::train
