#include "giant/train/generate.h"

#include <algorithm>
#include <limits>
#include <memory>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/base/utf8.h"
#include "giant/models/kv_cache.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::train {
namespace {

void check_options(const SampleOptions& o) {
  GIANT_CHECK(o.tokens >= 0, "the number of new tokens must not be negative, got ", o.tokens);
  GIANT_CHECK(o.temperature >= 0, "the temperature must not be negative, got ", o.temperature);
  GIANT_CHECK(o.top_k >= 0, "top-k must not be negative, got ", o.top_k);
  GIANT_CHECK(o.top_p > 0 && o.top_p <= 1, "top-p must be in (0, 1], got ", o.top_p);
  GIANT_CHECK(o.vocab > 0 && o.seq_len > 0, "the vocabulary (", o.vocab, ") and the context (", o.seq_len,
              ") must be positive");
}

// Hands the new tokens' text to on_text as whole characters become ready.
// Decoding all of them each time keeps what multi-token characters and
// tokenizers that merge across tokens decode to.
class TextStream {
 public:
  TextStream(const data::Tokenizer& tokenizer, const OnText& on_text) : tokenizer_(tokenizer), on_text_(on_text) {}

  void add(int32_t token) {
    if (!on_text_) return;
    tokens_.push_back(token);
    text_ = tokenizer_.decode(tokens_);
    emit(complete_utf8_prefix(text_));
  }
  void finish() {
    if (on_text_) emit(text_.size());
  }

 private:
  void emit(size_t ready) {
    if (ready <= shown_) return;
    on_text_(std::string_view(text_).substr(shown_, ready - shown_));
    shown_ = ready;
  }

  const data::Tokenizer& tokenizer_;
  const OnText& on_text_;
  std::vector<int32_t> tokens_;
  std::string text_;
  size_t shown_ = 0;  // bytes of text_ handed out
};

// The cache and the tokens it holds: a context that extends them runs only
// its new tokens; any other (a window past seq_len, another prompt) starts
// the cache again.
class CachedContext {
 public:
  CachedContext(parallel::LayerStack model, const parallel::TensorParallelGroup& tp) : gpt_(std::move(model), tp) {}

  at::Tensor next(const std::vector<int32_t>& tokens) {
    GIANT_CHECK(!tokens.empty(), "the context of the next token is empty");
    const size_t window = std::min<size_t>(tokens.size(), static_cast<size_t>(gpt_.capacity()));
    const auto first = tokens.end() - static_cast<std::ptrdiff_t>(window);
    const bool extends = first == tokens.begin() && cached_.size() < tokens.size() &&
                         std::equal(cached_.begin(), cached_.end(), tokens.begin());
    if (!extends) {
      gpt_.clear();
      cached_.clear();
    }
    const std::vector<int64_t> fresh(first + static_cast<std::ptrdiff_t>(cached_.size()), tokens.end());
    const at::Tensor logits =
        gpt_.extend(torch::tensor(fresh, torch::kLong).view({1, static_cast<int64_t>(fresh.size())}))[0];
    cached_.assign(first, tokens.end());
    return logits;
  }

 private:
  models::CachedGpt gpt_;
  std::vector<int32_t> cached_;
};

}  // namespace

int64_t sample_token(const at::Tensor& logits, const SampleOptions& options, at::Generator& generator) {
  GIANT_CHECK(logits.dim() == 1 && logits.size(0) >= options.vocab, "next-token logits must be [padded vocab >= ",
              options.vocab, "], got ", logits.sizes());
  torch::Tensor scores = logits.narrow(0, 0, options.vocab).to(torch::kFloat).cpu();
  if (options.temperature == 0) return scores.argmax().item<int64_t>();
  scores = scores / options.temperature;
  if (options.top_k > 0 && options.top_k < options.vocab) {
    // The k-th largest score: ties with it stay in.
    const torch::Tensor kth = std::get<0>(scores.topk(options.top_k)).select(0, options.top_k - 1);
    scores.masked_fill_(scores < kth, -std::numeric_limits<double>::infinity());
  }
  torch::Tensor probabilities = scores.softmax(0);
  if (options.top_p < 1) {
    // A token stays while the more likely ones sum to less than top_p: the
    // most likely one always does.
    const auto [sorted, order] = probabilities.sort(0, /*descending=*/true);
    const torch::Tensor dropped = (sorted.cumsum(0) - sorted) >= options.top_p;
    probabilities = torch::zeros_like(probabilities).scatter_(0, order, sorted.masked_fill(dropped, 0));
  }
  return torch::multinomial(probabilities, 1, false, generator).item<int64_t>();
}

Generation generate(const ContextLogits& logits, const data::Tokenizer& tokenizer, const SampleOptions& options,
                    const OnText& on_text) {
  check_options(options);
  torch::NoGradGuard no_grad;
  Generation g;
  g.tokens = tokenizer.encode(options.prompt);
  if (g.tokens.empty()) g.tokens = tokenizer.encode("\n");
  g.stats.prompt_tokens = static_cast<int64_t>(g.tokens.size());
  at::Generator generator = at::detail::createCPUGenerator(options.seed);
  TextStream stream(tokenizer, on_text);
  for (int64_t i = 0; i < options.tokens; ++i) {
    Stopwatch watch;
    const auto token = static_cast<int32_t>(sample_token(logits(g.tokens), options, generator));
    (i == 0 ? g.stats.prefill_s : g.stats.decode_s) += watch.seconds();
    g.tokens.push_back(token);
    stream.add(token);
  }
  stream.finish();
  g.stats.new_tokens = options.tokens;
  g.text = tokenizer.decode(g.tokens);
  return g;
}

ContextLogits windowed_logits(NextLogits next_logits, int64_t seq_len) {
  GIANT_CHECK(seq_len > 0, "the context must hold at least one token, got ", seq_len);
  return [next_logits = std::move(next_logits), seq_len](const std::vector<int32_t>& tokens) {
    const size_t context = std::min<size_t>(tokens.size(), static_cast<size_t>(seq_len));
    const std::vector<int64_t> window(tokens.end() - static_cast<std::ptrdiff_t>(context), tokens.end());
    return next_logits(torch::tensor(window, torch::kLong).view({1, static_cast<int64_t>(context)}));
  };
}

ContextLogits cached_model_logits(parallel::LayerStack model, const parallel::TensorParallelGroup& tp) {
  auto context = std::make_shared<CachedContext>(std::move(model), tp);
  return [context](const std::vector<int32_t>& tokens) { return context->next(tokens); };
}

NextLogits model_next_logits(parallel::LayerStack model, const parallel::TensorParallelGroup& tp) {
  return [model, tp](const at::Tensor& context) mutable {
    const auto device = model->parameters().front().device();
    torch::Tensor logits = model->forward(context.to(device)).select(1, context.size(1) - 1)[0];
    if (tp.size > 1) logits = parallel::gather_from_region(logits, *tp.comm, 0);
    return logits;
  };
}

}  // namespace giant::train
