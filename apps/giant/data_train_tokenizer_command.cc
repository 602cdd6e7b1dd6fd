// giant data train-tokenizer --vocab-size N --output DIR FILE...
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/base/units.h"
#include "giant/data/bpe_training.h"

namespace giant::app {
namespace {

struct TrainTokenizerFlags {
  int64_t vocab_size = 0;
  std::string output;
  std::vector<std::string> files;
};

// One line on stderr, rewritten in place on a terminal; elsewhere (a log) a
// line a second at most, and the last.
class ProgressLine {
 public:
  ProgressLine() : terminal_(::isatty(STDERR_FILENO) == 1) {}
  void show(const data::BpeTrainingProgress& p) {
    const bool last = p.merges_done == p.merges_total;
    if (!last && since_shown_.seconds() < (terminal_ ? 0.1 : 1.0)) return;
    since_shown_.reset();
    const double rate = p.seconds > 0 ? static_cast<double>(p.merges_done) / p.seconds : 0;
    std::fprintf(stderr, "%sgiant data train-tokenizer: merges %lld/%lld (%.0f%%), %.0f merges/s%s",
                 terminal_ ? "\r" : "", static_cast<long long>(p.merges_done),
                 static_cast<long long>(p.merges_total),
                 p.merges_total > 0 ? 100.0 * static_cast<double>(p.merges_done) / p.merges_total : 100.0, rate,
                 terminal_ ? "\033[K" : "\n");
    shown_ = true;
  }
  void finish() {
    if (terminal_ && shown_) std::fputc('\n', stderr);
  }

 private:
  bool terminal_;
  bool shown_ = false;
  Stopwatch since_shown_;
};

int run(const TrainTokenizerFlags& flags) {
  data::check_vocabulary_output(flags.output);  // before the work, not after
  ProgressLine line;
  data::BpeTrainingOptions options;
  options.vocab_size = flags.vocab_size;
  options.on_progress = [&](const data::BpeTrainingProgress& p) { line.show(p); };
  data::BpeTrainingStats stats;
  const data::Gpt2Vocabulary vocabulary = data::train_bpe(flags.files, options, &stats);
  line.finish();
  data::write_gpt2_vocabulary(vocabulary, flags.output);
  std::fprintf(stderr,
               "giant data train-tokenizer: %s in %lld pieces (%lld distinct) counted in %.2f s; %lld merges in "
               "%.2f s; vocabulary of %zu tokens (<|endoftext|> = %d) in %s/vocab.json and merges.txt\n",
               format_bytes(static_cast<double>(stats.bytes)).c_str(), static_cast<long long>(stats.pieces),
               static_cast<long long>(stats.distinct_pieces), stats.count_seconds,
               static_cast<long long>(stats.merges), stats.merge_seconds, vocabulary.token_bytes.size(),
               vocabulary.end_of_document, flags.output.c_str());
  if (stats.merges < flags.vocab_size - 257) {
    std::fprintf(stderr, "giant data train-tokenizer: the text has no pair left to merge after %lld merges: the "
                 "vocabulary is smaller than --vocab-size %lld\n", static_cast<long long>(stats.merges),
                 static_cast<long long>(flags.vocab_size));
  }
  return kExitOk;
}

}  // namespace

int data_train_tokenizer_command(const std::vector<std::string>& args) {
  CLI::App cli("Learn a GPT-2 style byte-level BPE from text files (GPT-2's pre-tokenization; ties between "
               "equally frequent pairs go to the smallest token ids), for data.tokenizer = \"gpt2:DIR\".",
               "giant data train-tokenizer");
  TrainTokenizerFlags flags;
  GlobalFlags global;
  cli.add_option("--vocab-size", flags.vocab_size,
                 "tokens in all: 256 bytes, then the merges, then <|endoftext|> (at least 257)")
      ->required()
      ->type_name("N");
  cli.add_option("--output", flags.output, "folder to write vocab.json and merges.txt into (created; must not hold them)")
      ->required()
      ->type_name("DIR");
  cli.add_option("files", flags.files, "text files to learn from (UTF-8; ill-formed bytes read as U+FFFD)")
      ->required()
      ->type_name("FILE...");
  add_global_flags(cli, global);
  cli.footer("Exit status: 0 done, 1 failed, 2 bad flags or unreadable files.");
  if (const auto code = parse_command_line(cli, args)) return *code;
  try {
    apply_global_flags(global);
    return run(flags);
  } catch (const std::exception& e) {
    return report_failure("giant data train-tokenizer", e);
  }
}

}  // namespace giant::app
