// Incremental inference with a key-value cache: the same logits as the whole
// sequence's forward, chunk by chunk, and clear errors for misuse.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/models/attention.h"
#include "giant/models/gpt.h"
#include "giant/models/kv_cache.h"
#include "support/gpt_rounding.h"
#include "support/rounding.h"
#include "support/tensor_error.h"

namespace giant::models {
namespace {

GptConfig tiny() {
  GptConfig c;
  c.layers = 3;
  c.hidden = 16;
  c.heads = 4;
  c.seq_len = 12;
  c.vocab = 50;
  c.vocab_pad = 32;  // padded to 64
  return c;
}

using giant::test::relative_error;
using giant::test::unit_roundoff;

using giant::test::attention_bound;
using giant::test::cached_forward_bound;

TEST(CachedAttention, ChunksMatchTheWholeSequence) {
  for (int64_t heads : {1, 4}) {
    const auto qkv = torch::randn({2, 9, 3 * 8}, torch::kDouble);
    const auto whole = causal_self_attention(qkv, heads, 0.0, false);
    BlockKeysValues cache;
    int64_t at = 0;
    for (int64_t chunk : {4, 1, 1, 3}) {
      const auto part = cached_self_attention(qkv.narrow(1, at, chunk), heads, 9, cache);
      EXPECT_LT(relative_error(part, whole.narrow(1, at, chunk)),
                attention_bound(8 / heads, 9, giant::test::kDoubleUnitRoundoff))
          << heads << " heads, at " << at;
      at += chunk;
      EXPECT_EQ(cache.length, at);
    }
    EXPECT_THROW(cached_self_attention(qkv.narrow(1, 0, 1), heads, 9, cache), Error);  // full
  }
}

// Prefill of a prompt, then one token at a time and a chunk: each last
// position's logits are the full forward's (fp32, within the rounding
// model's bound).
TEST(CachedGpt, LogitsMatchTheFullForward) {
  for (Activation activation : {Activation::gelu, Activation::gelu_tanh}) {
    GptConfig c = tiny();
    c.activation = activation;
    auto model = gpt_layer_list(c).build_all(7, torch::kFloat);
    model->eval();
    torch::NoGradGuard no_grad;
    const auto tokens = torch::randint(0, c.vocab, {2, c.seq_len}, torch::kLong);
    const auto full = model->forward(tokens).narrow(2, 0, c.vocab);
    CachedGpt cached(model);
    EXPECT_EQ(cached.capacity(), c.seq_len);
    for (int round = 0; round < 2; ++round) {  // again after clear(): the buffers are reused
      int64_t at = 0;
      for (int64_t chunk : {5, 1, 1, 2, 1, 2}) {
        const auto logits = cached.extend(tokens.narrow(1, at, chunk));
        at += chunk;
        ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, c.padded_vocab()}));
        EXPECT_LT(relative_error(logits.narrow(1, 0, c.vocab), full.select(1, at - 1)),
                  cached_forward_bound(c, unit_roundoff(Precision::fp32)))
            << activation_name(activation) << " at " << at;
        EXPECT_TRUE(torch::isinf(logits.narrow(1, c.vocab, c.padded_vocab() - c.vocab)).all().item<bool>());
      }
      EXPECT_EQ(cached.length(), c.seq_len);
      EXPECT_THROW(cached.extend(tokens.narrow(1, 0, 1)), Error);  // past the position table
      cached.clear();
      EXPECT_EQ(cached.length(), 0);
    }
  }
}

// Under mixed precision the cache holds the compute dtype and the logits
// stay within the same model's bound at bf16's unit roundoff.
TEST(CachedGpt, RunsInTheModelsDtype) {
  const GptConfig c = tiny();
  auto model = gpt_layer_list(c).build_all(8, torch::kFloat);
  model->eval();
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) p.set_data(p.detach().to(torch::kBFloat16));
  const auto tokens = torch::randint(0, c.vocab, {1, c.seq_len}, torch::kLong);
  const auto full = model->forward(tokens).narrow(2, 0, c.vocab).to(torch::kFloat);
  CachedGpt cached(model);
  int64_t at = 0;
  for (int64_t chunk : {4, 1, 1, 6}) {
    const auto logits = cached.extend(tokens.narrow(1, at, chunk));
    at += chunk;
    EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
    const double error = relative_error(logits.narrow(1, 0, c.vocab), full.select(1, at - 1));
    EXPECT_LT(error, cached_forward_bound(c, unit_roundoff(Precision::bf16))) << at;
    std::printf("bf16 cached logits at %ld: relative error %.2e (bound %.2e)\n", static_cast<long>(at), error,
                cached_forward_bound(c, unit_roundoff(Precision::bf16)));
  }
}

TEST(CachedGpt, RefusesWhatIsNotAWholeGpt) {
  const auto list = gpt_layer_list(tiny());
  EXPECT_THROW(CachedGpt(list.build(1, torch::kFloat, 1, 4)), Error);  // blocks only
  EXPECT_THROW(CachedGpt(list.build(1, torch::kFloat, 0, 3)), Error);  // no head
  CachedGpt cached(list.build_all(1, torch::kFloat));
  EXPECT_THROW(cached.extend(torch::zeros({2}, torch::kLong)), Error);
  EXPECT_THROW(cached.extend(torch::zeros({1, 0}, torch::kLong)), Error);
  EXPECT_THROW(cached.extend(torch::zeros({1, tiny().seq_len + 1}, torch::kLong)), Error);
}

}  // namespace
}  // namespace giant::models
