// GPT as a layer list: counts, determinism, causality, attention against a
// plain reference, padding, the FLOPs formula and config errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/models/attention.h"
#include "giant/models/gpt.h"
#include "support/gpt_rounding.h"
#include "support/rounding.h"
#include "support/tensor_error.h"

namespace giant::models {
namespace {

using giant::test::relative_error;

GptConfig tiny() {
  GptConfig c;
  c.layers = 2;
  c.hidden = 16;
  c.heads = 4;
  c.seq_len = 8;
  c.vocab = 50;
  c.vocab_pad = 32;  // padded to 64
  return c;
}

const auto kFloat = torch::TensorOptions().dtype(torch::kFloat);

std::vector<torch::Tensor> values(const torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

TEST(Gpt, LayerSpecsCountWhatIsBuilt) {
  for (GptConfig c : {tiny(), GptConfig{}}) {
    const auto list = gpt_layer_list(c);
    ASSERT_EQ(list.size(), static_cast<size_t>(c.layers + 3));
    EXPECT_EQ(list.at(0).name, "embedding");
    EXPECT_EQ(list.at(list.size() - 1).type_name, "GptHead");
    auto model = list.build_all(3, kFloat);
    EXPECT_EQ(parallel::count_parameters(*model), list.total_parameters());
    EXPECT_EQ(list.total_parameters(), c.parameter_count());
    for (size_t i = 0; i + 1 < list.size(); ++i) {
      EXPECT_EQ(parallel::count_parameters(*list.build(3, kFloat, i, i + 1)), list.at(i).num_parameters)
          << list.at(i).name;
    }
  }
  // GPT-2 small's shape: 124M parameters with the padded vocabulary.
  GptConfig gpt2;
  gpt2.layers = 12;
  gpt2.hidden = 768;
  gpt2.heads = 12;
  gpt2.seq_len = 1024;
  gpt2.vocab = 50257;
  EXPECT_EQ(gpt2.padded_vocab(), 50304);
  EXPECT_NEAR(static_cast<double>(gpt2.parameter_count()), 124.5e6, 0.1e6);
}

TEST(Gpt, SameWeightsBuiltInAnyOrderOrThread) {
  const auto list = gpt_layer_list(tiny());
  const auto reference = values(*list.build_all(9, kFloat));
  std::vector<torch::Tensor> pieces;
  for (size_t i = list.size() - 1; i-- > 0;) {  // last owner first; the head is tied
    auto v = values(*list.build(9, kFloat, i, i + 1));
    pieces.insert(pieces.begin(), v.begin(), v.end());
  }
  std::vector<torch::Tensor> threaded;
  std::thread([&] { threaded = values(*list.build_all(9, kFloat)); }).join();
  ASSERT_EQ(pieces.size(), reference.size());
  ASSERT_EQ(threaded.size(), reference.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_TRUE(torch::equal(pieces[i], reference[i])) << i;
    EXPECT_TRUE(torch::equal(threaded[i], reference[i])) << i;
  }
  // The head built alone (another pipeline stage) starts as the embedding.
  auto head = list.build(9, kFloat, list.size() - 1, list.size());
  auto whole = list.build_all(9, kFloat);
  EXPECT_TRUE(torch::equal(head->named_parameters()["head.tp_wte"],
                           whole->named_parameters()["embedding.wte.tp_weight"]));
}

TEST(Gpt, OutputAtAPositionIgnoresLaterTokens) {
  const GptConfig c = tiny();
  auto model = gpt_layer_list(c).build_all(1, kFloat);
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(0, c.vocab, {2, c.seq_len}, torch::kLong);
  auto changed = tokens.clone();
  changed.narrow(1, 5, 3).fill_(7);
  auto a = model->forward(tokens), b = model->forward(changed);
  EXPECT_TRUE(torch::equal(a.narrow(1, 0, 5), b.narrow(1, 0, 5)));
  EXPECT_FALSE(torch::equal(a.narrow(1, 5, 3), b.narrow(1, 5, 3)));
}

// Attention written out plainly: per head, scores, mask, softmax, weighted sum.
torch::Tensor reference_attention(const torch::Tensor& qkv, int64_t heads) {
  const int64_t batch = qkv.size(0), seq = qkv.size(1), hidden = qkv.size(2) / 3, d = hidden / heads;
  auto out = torch::zeros({batch, seq, hidden}, qkv.options());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      auto q = qkv[b].narrow(1, h * d, d), k = qkv[b].narrow(1, hidden + h * d, d);
      auto v = qkv[b].narrow(1, 2 * hidden + h * d, d);
      auto scores = torch::matmul(q, k.t()) / std::sqrt(static_cast<double>(d));
      for (int64_t i = 0; i < seq; ++i) {
        for (int64_t j = i + 1; j < seq; ++j) scores[i][j] = -INFINITY;
      }
      out[b].narrow(1, h * d, d).copy_(torch::matmul(scores.softmax(1), v));
    }
  }
  return out;
}

TEST(Attention, MatchesThePlainReference) {
  for (int64_t heads : {1, 2, 4}) {
    auto qkv = torch::randn({3, 7, 3 * 8}, torch::kDouble);
    auto fast = causal_self_attention(qkv, heads, 0.0, true);
    auto plain = reference_attention(qkv, heads);
    EXPECT_LT(relative_error(fast, plain), giant::test::attention_bound(8 / heads, 7, giant::test::kDoubleUnitRoundoff))
        << heads;
  }
  EXPECT_THROW(causal_self_attention(torch::zeros({2, 3, 10}), 4, 0.0, true), Error);
}

// One block written out from its parameters, with `nonlinearity` in its MLP.
torch::Tensor reference_block(torch::nn::Module& block, const torch::Tensor& x, int64_t heads,
                              const std::function<torch::Tensor(const torch::Tensor&)>& nonlinearity) {
  auto p = block.named_parameters();
  const int64_t h = x.size(-1);
  auto ln = [&](const torch::Tensor& t, const std::string& w, const std::string& b) {
    return torch::layer_norm(t, {h}, p["block_0." + w], p["block_0." + b], 1e-5);
  };
  auto linear = [&](const torch::Tensor& t, const std::string& layer, const char* bias) {
    return torch::linear(t, p["block_0." + layer + ".tp_weight"], p["block_0." + layer + "." + bias]);
  };
  torch::Tensor a = causal_self_attention(linear(ln(x, "ln1_weight", "ln1_bias"), "qkv", "tp_bias"), heads, 0.0, false);
  torch::Tensor y = x + linear(a, "proj", "bias");
  return y + linear(nonlinearity(linear(ln(y, "ln2_weight", "ln2_bias"), "fc1", "tp_bias")), "fc2", "bias");
}

// model.activation = gelu_tanh puts GPT-2's tanh approximation in the MLP;
// gelu keeps erf.
TEST(Gpt, ActivationChoosesTheMlpNonlinearity) {
  GptConfig c = tiny();
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({2, c.seq_len, c.hidden});
  auto block_output = [&](Activation activation) {
    c.activation = activation;
    auto stack = gpt_layer_list(c).build(4, kFloat, 1, 2);  // block.0 alone
    stack->eval();
    torch::manual_seed(6);  // the same non-trivial weights and biases for both
    for (auto& parameter : stack->parameters()) parameter.normal_(0, 0.5);
    return std::make_pair(stack->forward(x), stack);
  };
  auto [erf_out, erf_block] = block_output(Activation::gelu);
  auto [tanh_out, tanh_block] = block_output(Activation::gelu_tanh);
  auto erf_gelu = [](const torch::Tensor& t) { return 0.5 * t * (1 + torch::erf(t / std::sqrt(2.0))); };
  auto tanh_gelu = [](const torch::Tensor& t) {
    return 0.5 * t * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (t + 0.044715 * t.pow(3))));
  };
  // The block written out orders its products otherwise: one block of
  // support/gpt_rounding.h's model, in fp32. The two activations must differ
  // by more than rounding could.
  GptConfig one_block = c;
  one_block.layers = 1;
  const double bound = giant::test::cached_forward_bound(one_block, giant::test::unit_roundoff(Precision::fp32));
  EXPECT_LT(relative_error(tanh_out, reference_block(*tanh_block, x, c.heads, tanh_gelu)), bound);
  EXPECT_LT(relative_error(erf_out, reference_block(*erf_block, x, c.heads, erf_gelu)), bound);
  EXPECT_GT(relative_error(tanh_out, erf_out), 10 * bound);
  EXPECT_STREQ(activation_name(Activation::gelu_tanh), "gelu_tanh");
  EXPECT_EQ(activation_from_name("gelu_tanh"), Activation::gelu_tanh);
  EXPECT_EQ(activation_from_name("gelu"), Activation::gelu);
  EXPECT_EQ(activation_from_name("relu"), std::nullopt);
}

TEST(Gpt, PaddingIsNeverPredictedNorTrained) {
  const GptConfig c = tiny();
  auto model = gpt_layer_list(c).build_all(2, kFloat);
  auto tokens = torch::randint(0, c.vocab, {2, c.seq_len}, torch::kLong);
  auto logits = model->forward(tokens);
  ASSERT_EQ(logits.size(2), c.padded_vocab());
  EXPECT_TRUE(torch::isinf(logits.narrow(2, c.vocab, c.padded_vocab() - c.vocab)).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(logits.narrow(2, 0, c.vocab)).all().item<bool>());
  auto loss = gpt_loss(logits, torch::randint(0, c.vocab, {2, c.seq_len}, torch::kLong));
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  const auto& wte_grad = model->named_parameters()["embedding.wte.tp_weight"].grad();
  EXPECT_EQ(wte_grad.narrow(0, c.vocab, c.padded_vocab() - c.vocab).abs().max().item<float>(), 0.0f);
  for (const auto& p : model->parameters()) EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
}

TEST(Gpt, FlopsFollowNarayanansFormula) {
  GptConfig c;
  c.layers = 4;
  c.hidden = 512;
  c.heads = 8;
  c.seq_len = 256;
  c.vocab = 256;
  const double B = 8, s = 256, L = 4, h = 512, V = 256;
  const double formula = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
  // Two formulas of about ten double roundings each.
  EXPECT_NEAR(c.train_flops_per_sequence() * B / formula, 1.0, giant::test::gamma(20, giant::test::kDoubleUnitRoundoff));
}

TEST(GptConfig, ErrorsNameTheKey) {
  auto key_of = [](GptConfig c) {
    try {
      c.validate();
    } catch (const ConfigError& e) {
      return e.key();
    }
    return std::string("none");
  };
  GptConfig c = tiny();
  EXPECT_EQ(key_of(c), "none");
  c.heads = 3;
  EXPECT_EQ(key_of(c), "model.heads");
  c = tiny();
  c.layers = 0;
  EXPECT_EQ(key_of(c), "model.layers");
  c = tiny();
  c.dropout = 1.0;
  EXPECT_EQ(key_of(c), "model.dropout");
  c = tiny();
  c.ffn = -1;
  EXPECT_EQ(key_of(c), "model.ffn");
}

}  // namespace
}  // namespace giant::models
