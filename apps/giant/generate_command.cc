// giant generate CHECKPOINT [--prompt TEXT] [--max-tokens N] [--temperature T]
//     [--top-k K] [--top-p P] [--seed S] [--no-cache] [--threads N]
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <torch/torch.h>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/error.h"
#include "giant/base/utf8.h"
#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/train/generate.h"
#include "giant/train/inference_model.h"

namespace giant::app {
namespace {

struct GenerateFlags {
  std::string checkpoint;
  train::SampleOptions sample;
  bool no_cache = false;
  int threads = 0;  // 0: libtorch's default
};

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// ConfigError naming the flag that is out of range, or the CHECKPOINT that
// is neither a checkpoint nor a checkpoint.dir (a corrupt one is found
// later: a runtime failure).
void check_flags(const GenerateFlags& f) {
  const train::SampleOptions& s = f.sample;
  if (s.tokens < 0) throw ConfigError("--max-tokens", "must not be negative, got " + std::to_string(s.tokens));
  if (!(s.temperature >= 0)) {
    throw ConfigError("--temperature", "must not be negative (0: greedy), got " + number_text(s.temperature));
  }
  if (s.top_k < 0) throw ConfigError("--top-k", "must not be negative (0: off), got " + std::to_string(s.top_k));
  if (!(s.top_p > 0 && s.top_p <= 1)) {
    throw ConfigError("--top-p", "must be in (0, 1] (1: off), got " + number_text(s.top_p));
  }
  if (f.threads < 0) {
    throw ConfigError("--threads", "must not be negative (0: libtorch's choice), got " + std::to_string(f.threads));
  }
  std::error_code error;
  if (!std::filesystem::exists(f.checkpoint, error)) {
    throw ConfigError("CHECKPOINT", "'" + f.checkpoint + "' does not exist");
  }
  try {
    giant::checkpoint::resolve_checkpoint(f.checkpoint);
  } catch (const FormatError& e) {
    throw ConfigError("CHECKPOINT", e.what());
  }
}

void print_stats(const train::GenerationStats& s, bool cached) {
  const double seconds = s.prefill_s + s.decode_s;
  auto rate = [](int64_t tokens, double seconds) { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0; };
  const int64_t decoded = s.new_tokens > 0 ? s.new_tokens - 1 : 0;
  std::fprintf(stderr,
               "giant generate: %lld tokens in %.3f s (%.1f tokens/s), %s cache; prefill %lld prompt tokens in "
               "%.3f s; decode %lld tokens in %.3f s (%.1f tokens/s)\n",
               static_cast<long long>(s.new_tokens), seconds, rate(s.new_tokens, seconds), cached ? "with" : "without",
               static_cast<long long>(s.prompt_tokens), s.prefill_s, static_cast<long long>(decoded), s.decode_s,
               rate(decoded, s.decode_s));
}

int run(const GenerateFlags& flags) {
  if (flags.threads > 0) torch::set_num_threads(flags.threads);
  train::InferenceModel model = train::load_inference_model(flags.checkpoint);
  train::SampleOptions options = flags.sample;
  options.vocab = model.model.vocab;
  options.seq_len = model.model.seq_len;
  const train::ContextLogits logits =
      flags.no_cache ? train::windowed_logits(train::model_next_logits(model.layers), model.model.seq_len)
                     : train::cached_model_logits(model.layers);
  // What a terminal shows: valid UTF-8 without control characters, each
  // token's text as soon as its characters are whole.
  std::cout << printable_utf8(options.prompt) << std::flush;
  const train::Generation generation =
      train::generate(logits, *model.tokenizer, options, [](std::string_view text) {
        std::cout << printable_utf8(text) << std::flush;
      });
  std::cout << std::endl;
  print_stats(generation.stats, !flags.no_cache);
  return kExitOk;
}

}  // namespace

int generate_command(const std::vector<std::string>& args) {
  CLI::App cli("Generate text from a checkpoint (saved in any layout), streamed to standard output as it is made.",
               "giant generate");
  GenerateFlags flags;
  GlobalFlags global;
  cli.add_option("checkpoint", flags.checkpoint, "a checkpoint folder, or a checkpoint.dir (its latest)")
      ->required()
      ->type_name("CHECKPOINT");
  cli.add_option("--prompt", flags.sample.prompt, "text the model continues (default: a new line)")
      ->type_name("TEXT");
  cli.add_option("--max-tokens", flags.sample.tokens, "new tokens to generate")->type_name("N")->capture_default_str();
  cli.add_option("--temperature", flags.sample.temperature, "sampling temperature; 0: greedy (the likeliest token)")
      ->type_name("T")
      ->capture_default_str();
  cli.add_option("--top-k", flags.sample.top_k, "draw among the K likeliest tokens only (0: all)")
      ->type_name("K")
      ->capture_default_str();
  cli.add_option("--top-p", flags.sample.top_p,
                 "draw among the fewest likeliest tokens whose probability reaches P (1: all)")
      ->type_name("P")
      ->capture_default_str();
  cli.add_option("--seed", flags.sample.seed, "seed of the draws: the same seed, the same text")
      ->type_name("S")
      ->capture_default_str();
  cli.add_flag("--no-cache", flags.no_cache, "run the whole context for every token (no key-value cache)");
  cli.add_option("--threads", flags.threads, "intra-op threads (0, the default: libtorch's choice)")->type_name("N");
  add_global_flags(cli, global);
  cli.footer(
      "Prints the prompt, then each token as it is made; a line of statistics (tokens/s, prefill and decode) on "
      "standard error.\nExit status: 0 done, 1 failed, 2 bad flags or checkpoint path.");
  if (const auto code = parse_command_line(cli, args)) return *code;
  try {
    apply_global_flags(global);
    check_flags(flags);
  } catch (const std::exception& e) {
    report_failure("giant generate", e);
    return kExitBadInput;
  }
  try {
    return run(flags);
  } catch (const c10::Error& e) {
    return report_failure("giant generate", Error(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return report_failure("giant generate", e);
  }
}

}  // namespace giant::app
