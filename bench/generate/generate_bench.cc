// giant-generate-bench: one generation from a GPT with seeded weights (by
// default the bench model of bench/train/common.sh: 4 layers, hidden 256, 4
// heads, sequence 128, byte vocabulary), with the key-value cache or without
// it, timed; one key=value line. bench/train/generate_speed.sh runs it
// interleaved and takes the medians.
#include <cstdint>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "giant/base/crc32c.h"
#include "giant/data/tokenizer.h"
#include "giant/models/gpt.h"
#include "giant/train/generate.h"

namespace {

struct Flags {
  giant::models::GptConfig model;
  giant::train::SampleOptions sample;
  std::string mode = "cached";
  int threads = 1;
  int64_t seed = 1234;
  int64_t warmup_tokens = 8;
};

giant::train::ContextLogits logits_of(const Flags& f, const giant::parallel::LayerStack& model) {
  if (f.mode == "cached") return giant::train::cached_model_logits(model);
  return giant::train::windowed_logits(giant::train::model_next_logits(model), f.model.seq_len);
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  f.sample.prompt = "And God said";
  f.sample.tokens = 256;
  f.sample.temperature = 0;
  CLI::App cli("One timed generation from a seeded GPT, with or without the key-value cache.",
               "giant-generate-bench");
  cli.add_option("--mode", f.mode, "cached or uncached")->check(CLI::IsMember({"cached", "uncached"}));
  cli.add_option("--layers", f.model.layers)->capture_default_str();
  cli.add_option("--hidden", f.model.hidden)->capture_default_str();
  cli.add_option("--heads", f.model.heads)->capture_default_str();
  cli.add_option("--seq-len", f.model.seq_len)->capture_default_str();
  cli.add_option("--tokens", f.sample.tokens, "new tokens")->capture_default_str();
  cli.add_option("--prompt", f.sample.prompt)->capture_default_str();
  cli.add_option("--temperature", f.sample.temperature, "0: greedy")->capture_default_str();
  cli.add_option("--threads", f.threads)->capture_default_str();
  cli.add_option("--seed", f.seed, "of the weights and the draws")->capture_default_str();
  cli.add_option("--warmup-tokens", f.warmup_tokens, "an untimed generation first")->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  try {
    torch::set_num_threads(f.threads);
    const giant::data::ByteTokenizer tokenizer;
    f.model.vocab = tokenizer.vocab_size();
    f.sample.vocab = f.model.vocab;
    f.sample.seq_len = f.model.seq_len;
    f.sample.seed = static_cast<uint64_t>(f.seed);
    auto model = giant::models::gpt_layer_list(f.model).build_all(static_cast<uint64_t>(f.seed), torch::kFloat);
    model->eval();
    giant::train::SampleOptions warmup = f.sample;
    warmup.tokens = f.warmup_tokens;
    giant::train::generate(logits_of(f, model), tokenizer, warmup);
    const giant::train::Generation g = giant::train::generate(logits_of(f, model), tokenizer, f.sample);
    const auto& s = g.stats;
    const double seconds = s.prefill_s + s.decode_s;
    const std::string bytes(reinterpret_cast<const char*>(g.tokens.data()), g.tokens.size() * sizeof(int32_t));
    std::printf(
        "bench=generate mode=%s layers=%lld hidden=%lld heads=%lld seq_len=%lld threads=%d prompt_tokens=%lld "
        "tokens=%lld seconds=%.6f tokens_per_s=%.2f prefill_s=%.6f decode_s=%.6f decode_tokens_per_s=%.2f "
        "tokens_crc32c=%08x\n",
        f.mode.c_str(), static_cast<long long>(f.model.layers), static_cast<long long>(f.model.hidden),
        static_cast<long long>(f.model.heads), static_cast<long long>(f.model.seq_len), f.threads,
        static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.new_tokens), seconds,
        seconds > 0 ? static_cast<double>(s.new_tokens) / seconds : 0.0, s.prefill_s, s.decode_s,
        s.decode_s > 0 ? static_cast<double>(s.new_tokens - 1) / s.decode_s : 0.0, giant::crc32c(bytes));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "giant-generate-bench: %s\n", e.what());
    return 1;
  }
}
