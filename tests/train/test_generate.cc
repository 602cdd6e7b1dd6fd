// Generation: the cached and the uncached model give the same greedy text
// (past the context too, and under tensor parallelism), seeds repeat,
// top-k, top-p and temperature 0 select as they should, and the streamed
// text is the decoded text, whole characters at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/data/tokenizer.h"
#include "giant/models/gpt.h"
#include "giant/models/kv_cache.h"
#include "giant/train/generate.h"
#include "support/gpt_rounding.h"
#include "support/rounding.h"
#include "train/support/layout_bounds.h"
#include "train/support/layout_runner.h"

namespace giant::train {
namespace {

models::GptConfig tiny() {
  models::GptConfig c;
  c.layers = 2;
  c.hidden = 32;
  c.heads = 4;
  c.seq_len = 16;
  c.vocab = 256;  // the byte tokenizer's
  c.init_std = 0.3;  // logits far apart: no near-ties for rounding to flip
  return c;
}

parallel::LayerStack build(const models::GptConfig& c, parallel::TensorParallelGroup tp = {}) {
  auto model = models::gpt_layer_list(c).build_all(11, torch::kFloat, tp);
  model->eval();
  return model;
}

SampleOptions options_for(const models::GptConfig& c, int64_t tokens, double temperature) {
  SampleOptions o;
  o.prompt = "And God said";
  o.tokens = tokens;
  o.temperature = temperature;
  o.vocab = c.vocab;
  o.seq_len = c.seq_len;
  return o;
}

std::vector<int32_t> new_tokens(const Generation& g) {
  return {g.tokens.begin() + g.stats.prompt_tokens, g.tokens.end()};
}

const data::ByteTokenizer kBytes;

// 12 prompt tokens and 40 new ones: the context passes seq_len = 16, where
// the cached path prefills the window again each step.
TEST(Generate, GreedyWithAndWithoutTheCacheAgree) {
  const models::GptConfig c = tiny();
  auto model = build(c);
  const SampleOptions o = options_for(c, 40, 0.0);
  const Generation cached = generate(cached_model_logits(model), kBytes, o);
  const Generation uncached = generate(windowed_logits(model_next_logits(model), c.seq_len), kBytes, o);
  ASSERT_EQ(cached.tokens.size(), 12u + 40u);
  EXPECT_EQ(cached.tokens, uncached.tokens);
  EXPECT_EQ(cached.text, uncached.text);
  EXPECT_EQ(cached.text.rfind("And God said", 0), 0u);
  // Greedy is the argmax of the whole forward on the last seq_len tokens.
  torch::NoGradGuard no_grad;
  std::vector<int32_t> tokens = kBytes.encode(o.prompt);
  for (int i = 0; i < 40; ++i) {
    const size_t n = std::min<size_t>(tokens.size(), c.seq_len);
    const std::vector<int64_t> window(tokens.end() - static_cast<std::ptrdiff_t>(n), tokens.end());
    const auto logits = model->forward(torch::tensor(window).view({1, static_cast<int64_t>(n)}));
    tokens.push_back(static_cast<int32_t>(logits[0][n - 1].narrow(0, 0, c.vocab).argmax().item<int64_t>()));
  }
  EXPECT_EQ(cached.tokens, tokens);
  // A new prompt on the same cached model starts its cache again.
  const ContextLogits reused = cached_model_logits(model);
  generate(reused, kBytes, o);
  SampleOptions other = o;
  other.prompt = "In the beginning";
  EXPECT_EQ(generate(reused, kBytes, other).tokens,
            generate(windowed_logits(model_next_logits(model), c.seq_len), kBytes, other).tokens);
}

TEST(Generate, TheSameSeedGivesTheSameSampleAndAnotherAnother) {
  const models::GptConfig c = tiny();
  auto model = build(c);
  SampleOptions o = options_for(c, 30, 1.0);
  o.seed = 7;
  const auto first = generate(cached_model_logits(model), kBytes, o).tokens;
  EXPECT_EQ(generate(cached_model_logits(model), kBytes, o).tokens, first);
  EXPECT_EQ(generate(windowed_logits(model_next_logits(model), c.seq_len), kBytes, o).tokens, first);
  o.seed = 8;
  EXPECT_NE(generate(cached_model_logits(model), kBytes, o).tokens, first);
}

TEST(Generate, TopKOneTinyTopPAndTemperatureZeroAreGreedy) {
  const models::GptConfig c = tiny();
  auto model = build(c);
  const auto greedy = generate(cached_model_logits(model), kBytes, options_for(c, 24, 0.0)).tokens;
  SampleOptions top_k = options_for(c, 24, 1.5);
  top_k.top_k = 1;
  top_k.seed = 3;
  EXPECT_EQ(generate(cached_model_logits(model), kBytes, top_k).tokens, greedy);
  SampleOptions top_p = options_for(c, 24, 1.5);
  top_p.top_p = 1e-6;
  top_p.seed = 4;
  EXPECT_EQ(generate(cached_model_logits(model), kBytes, top_p).tokens, greedy);
  // Hot sampling without them is not greedy.
  SampleOptions hot = options_for(c, 24, 1.5);
  EXPECT_NE(generate(cached_model_logits(model), kBytes, hot).tokens, greedy);
}

// On fixed logits: top-k keeps the k best, top-p the fewest best reaching p.
TEST(SampleToken, TopKAndTopPKeepTheMostLikely) {
  SampleOptions o;
  o.vocab = 6;
  o.temperature = 1.0;
  // Probabilities 0.5, 0.3, 0.2 for tokens 4, 1, 2; about 0 for the rest;
  // the padding entry (6) is never drawn.
  const auto logits = torch::tensor({-30.0, std::log(0.3), std::log(0.2), -30.0, std::log(0.5), -30.0, 100.0});
  auto draws = [&](const SampleOptions& options) {
    at::Generator generator = at::detail::createCPUGenerator(1);
    std::set<int64_t> seen;
    for (int i = 0; i < 300; ++i) seen.insert(sample_token(logits, options, generator));
    return seen;
  };
  EXPECT_EQ(draws(o), (std::set<int64_t>{1, 2, 4}));
  o.top_k = 2;
  EXPECT_EQ(draws(o), (std::set<int64_t>{1, 4}));
  o.top_k = 0;
  o.top_p = 0.7;  // 0.5 + 0.3 reach it
  EXPECT_EQ(draws(o), (std::set<int64_t>{1, 4}));
  // Just under token 4's 0.5: its computed probability (exp, a sum of 7
  // terms, a division in fp32: gamma_10 of it at most, support/rounding.h)
  // reaches that on any kernels. At exactly 0.5 it would depend on how this
  // CPU's softmax rounds (with ATEN_CPU_CAPABILITY=default it comes out
  // under 0.5 and token 1 stays).
  o.top_p = 0.5 * (1 - 2 * giant::test::gamma(10, giant::test::unit_roundoff(Precision::fp32)));
  EXPECT_EQ(draws(o), (std::set<int64_t>{4}));
  o.top_p = 0.85;
  o.top_k = 1;  // both: the stricter wins
  EXPECT_EQ(draws(o), (std::set<int64_t>{4}));
  o.top_k = 0;
  o.top_p = 1.0;
  o.temperature = 0;
  EXPECT_EQ(draws(o), (std::set<int64_t>{4}));
}

TEST(Generate, BadOptionsAreRefused) {
  const models::GptConfig c = tiny();
  const ContextLogits never = [](const std::vector<int32_t>&) -> at::Tensor {
    throw std::logic_error("not called");
  };
  auto refused = [&](auto change) {
    SampleOptions o = options_for(c, 3, 1.0);
    change(o);
    EXPECT_THROW(generate(never, kBytes, o), Error);
  };
  refused([](SampleOptions& o) { o.temperature = -0.1; });
  refused([](SampleOptions& o) { o.top_k = -1; });
  refused([](SampleOptions& o) { o.top_p = 0; });
  refused([](SampleOptions& o) { o.top_p = 1.01; });
  refused([](SampleOptions& o) { o.tokens = -1; });
  SampleOptions none = options_for(c, 0, 1.0);  // no tokens: no logits wanted
  const Generation g = generate(never, kBytes, none);
  EXPECT_EQ(g.text, "And God said");
  EXPECT_EQ(g.stats.prompt_tokens, 12);
  EXPECT_EQ(g.stats.new_tokens, 0);
}

// Logits that make greedy emit `bytes` one by one.
ContextLogits scripted(const std::string& bytes, size_t prompt_tokens) {
  return [bytes, prompt_tokens](const std::vector<int32_t>& tokens) {
    auto logits = torch::zeros({256});
    logits[static_cast<unsigned char>(bytes.at(tokens.size() - prompt_tokens))] = 1.0;
    return logits;
  };
}

TEST(Generate, StreamsWholeCharactersAndFlushesTheRest) {
  // a, é (2 bytes), € (3), an ill-formed byte, an emoji (4), then the
  // first byte of é, left incomplete at the end.
  const std::string bytes = "a\xC3\xA9\xE2\x82\xAC\xFF\xF0\x9F\x98\x80\xC3";
  SampleOptions o;
  o.prompt = "x";
  o.tokens = static_cast<int64_t>(bytes.size());
  o.temperature = 0;
  std::vector<std::string> pieces;
  const Generation g = generate(scripted(bytes, 1), kBytes, o, [&](std::string_view t) { pieces.emplace_back(t); });
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "\xC3\xA9", "\xE2\x82\xAC", "\xFF", "\xF0\x9F\x98\x80", "\xC3"}));
  EXPECT_EQ(g.text, "x" + bytes);
  EXPECT_EQ(g.stats.new_tokens, o.tokens);
}

TEST(Generate, StreamedTextConcatenatesToTheDecodedNewTokens) {
  const models::GptConfig c = tiny();
  auto model = build(c);
  SampleOptions o = options_for(c, 60, 1.2);
  o.seed = 5;
  std::string streamed;
  int calls = 0;
  const Generation g = generate(cached_model_logits(model), kBytes, o, [&](std::string_view t) {
    streamed += t;
    ++calls;
  });
  EXPECT_EQ(streamed, kBytes.decode(new_tokens(g)));
  EXPECT_EQ(g.text, "And God said" + streamed);
  EXPECT_GT(calls, 1);
  EXPECT_EQ(g.stats.prompt_tokens, 12);
  EXPECT_EQ(g.stats.new_tokens, 60);
  EXPECT_GE(g.stats.prefill_s, 0.0);
  EXPECT_GT(g.stats.decode_s, 0.0);
}

// Runs body(tp group) on `size` ranks as threads over one MemoryStore.
void run_tensor_parallel(int size, const std::function<void(const parallel::TensorParallelGroup&)>& body) {
  auto store = std::make_shared<ccl::MemoryStore>();
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      std::shared_ptr<ccl::Communicator> comm;
      try {
        at::init_num_threads();
        torch::set_num_threads(1);
        comm = ccl::Communicator::create(store, rank, size, {}, "tp");
        body({comm.get(), rank, size});
      } catch (const std::exception& e) {
        if (comm) comm->abort(e.what());
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Each tp rank caches its own heads: the cached logits are the single
// process's full forward's, and the greedy text is the single process's.
TEST(Generate, TensorParallelRanksCacheTheirOwnHeads) {
  const models::GptConfig c = tiny();
  auto single = build(c);
  torch::NoGradGuard no_grad;
  const auto tokens = torch::randint(0, c.vocab, {1, c.seq_len}, torch::kLong);
  const auto full = single->forward(tokens).narrow(2, 0, c.vocab);
  const SampleOptions o = options_for(c, 30, 0.0);
  const auto greedy = generate(cached_model_logits(single), kBytes, o).tokens;
  std::vector<double> errors(2);
  std::vector<std::vector<int32_t>> texts(2);
  run_tensor_parallel(2, [&](const parallel::TensorParallelGroup& tp) {
    auto model = build(c, tp);
    models::CachedGpt cached(model, tp);
    double worst = 0;
    int64_t at = 0;
    for (int64_t chunk : {6, 1, 1, 5, 1, 2}) {
      const auto logits = cached.extend(tokens.narrow(1, at, chunk))[0].narrow(0, 0, c.vocab);
      at += chunk;
      worst = std::max(worst, test::relative_error(logits, full[0][at - 1]));
    }
    errors[tp.rank] = worst;
    texts[tp.rank] = generate(cached_model_logits(model, tp), kBytes, o).tokens;
  });
  // The tp forward's own roundings (train/support/layout_bounds.h) and the
  // cache's other product shapes (support/gpt_rounding.h), independent.
  RunConfig split;
  split.model = c;
  split.layout.tp = 2;
  split.train.global_batch = split.layout.micro_batch = 1;  // one sequence
  const double u = giant::test::unit_roundoff(Precision::fp32);
  const double bound = giant::test::RoundingBudget()
                           .add_bound(test::layout_bounds(split).forward)
                           .add_bound(giant::test::cached_forward_bound(c, u))
                           .bound();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_LT(errors[rank], bound) << "tp rank " << rank;
    EXPECT_EQ(texts[rank], greedy) << "tp rank " << rank;
  }
}

// The end-of-run sample, through the cache with or without tensor
// parallelism and through the pipeline without one, is the same text.
TEST(Generate, TheTrainersSampleIsTheSameInEveryLayout) {
  torch::set_num_threads(1);
  const test::LayoutRunner runner({"train.steps=3", "train.sample_tokens=40", "train.sample_prompt=\"In\""});
  const std::string single = runner.run({}).ranks[0].summary.sample;
  EXPECT_EQ(single.rfind("In", 0), 0u);
  EXPECT_GT(single.size(), 20u);
  test::Layout tp2;
  tp2.tp = 2;
  test::Layout pp2;
  pp2.pp = 2;
  for (const test::Layout& layout : {tp2, pp2}) {
    for (const auto& rank : runner.run(layout).ranks) EXPECT_EQ(rank.summary.sample, single) << layout.name();
  }
}

}  // namespace
}  // namespace giant::train
