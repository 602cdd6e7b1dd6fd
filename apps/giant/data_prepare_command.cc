// giant data prepare --input FILE... --tokenizer SPEC --output PREFIX: text
// or JSON lines in, Megatron's PREFIX.bin + PREFIX.idx out (data/prepare.h),
// with a progress bar on stderr.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/data/index_format.h"
#include "giant/data/prepare.h"
#include "giant/data/tokenizer.h"
#include "giant/launch/signal_pipe.h"
#include "giant/train/progress.h"

namespace giant::app {
namespace {

constexpr const char* kName = "giant data prepare";

// On a terminal a bar rewritten in place (at most 10 times a second);
// otherwise a plain line every few seconds. Then one summary line.
class PrepareProgressPrinter {
 public:
  PrepareProgressPrinter(std::ostream& out, bool live) : out_(out), live_(live) {}

  void update(const data::PrepareProgress& p) {
    const double interval = live_ ? 0.1 : 5.0;
    if (since_shown_.seconds() < interval) return;
    since_shown_.reset();
    const double rate = p.seconds > 0 ? static_cast<double>(p.input_bytes_done) / p.seconds : 0;
    char text[256];
    if (p.input_bytes_total > 0) {
      const double done = static_cast<double>(std::min(p.input_bytes_done, p.input_bytes_total));
      const double fraction = done / static_cast<double>(p.input_bytes_total);
      const double eta = rate > 0 ? (static_cast<double>(p.input_bytes_total) - done) / rate : -1;
      std::snprintf(text, sizeof text, "%s%5.1f%%  %.1f MB/s  ETA %s  %lld documents",
                    live_ ? bar(fraction).c_str() : "", 100 * fraction, rate / 1e6,
                    train::Progress::format_eta(eta).c_str(), static_cast<long long>(p.documents));
    } else {  // a pipe: no size to measure against
      std::snprintf(text, sizeof text, "%.1f MB  %.1f MB/s  %lld documents", p.input_bytes_done / 1e6, rate / 1e6,
                    static_cast<long long>(p.documents));
    }
    if (live_) {
      out_ << "\r\033[K" << text << std::flush;
      shown_ = true;
    } else {
      out_ << "prepare: " << text << '\n' << std::flush;
    }
  }

  void finish(const data::PrepareProgress& p, double seconds, data::TokenDtype dtype, const std::string& prefix) {
    clear();
    const double mb = p.input_bytes_done / 1e6;
    char figures[128];
    std::snprintf(figures, sizeof figures, "from %.1f MB in %.2f s (%.1f MB/s)", mb, seconds,
                  seconds > 0 ? mb / seconds : 0.0);
    const std::string text = std::string(kName) + ": " + std::to_string(p.documents) + " documents, " +
                             std::to_string(p.tokens) + " tokens (" +
                             data::token_dtype_name(static_cast<uint8_t>(dtype)) + ") " + figures + " -> " +
                             prefix + ".bin, " + prefix + ".idx";
    out_ << text << '\n' << std::flush;
  }

  // Takes the live bar off the line before another message.
  void clear() {
    if (shown_) out_ << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  static std::string bar(double fraction) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] ";
  }

  std::ostream& out_;
  bool live_;
  bool shown_ = false;
  Stopwatch since_shown_;
};

struct PrepareFlags {
  data::PrepareOptions options;
  std::string tokenizer;
  GlobalFlags global;
};

void add_flags(CLI::App& cli, PrepareFlags& flags) {
  data::PrepareOptions& o = flags.options;
  cli.add_option("--input", o.inputs, "text or JSON lines files (.jsonl/.json), read in this order")
      ->required()
      ->expected(1, -1)
      ->type_name("FILE...");
  cli.add_option("--tokenizer", flags.tokenizer, "byte, gpt2:DIR or sentencepiece:FILE.model")
      ->required()
      ->type_name("SPEC");
  cli.add_option("--output", o.output, "writes PREFIX.bin and PREFIX.idx")->required()->type_name("PREFIX");
  cli.add_option("--json-key", o.json_key, "the key of a JSON line's text (default text)")->type_name("KEY");
  cli.add_flag("--append-eod", o.append_eod, "end each document with the tokenizer's end-of-document token");
  cli.add_option("--workers", o.workers, "tokenizing threads (default 1); the output is the same for any number")
      ->type_name("N");
  add_global_flags(cli, flags.global);
}

// Runs the preparation with SIGINT/SIGTERM/SIGHUP caught: they stop it
// cleanly (no output left) instead of killing it mid-write.
int run_prepare(PrepareFlags& flags) {
  const std::unique_ptr<data::Tokenizer> tokenizer = data::make_tokenizer(flags.tokenizer);
  launch::SignalPipe signals;
  int stop_signal = 0;
  PrepareProgressPrinter printer(std::cerr, isatty(STDERR_FILENO) != 0);
  data::PrepareOptions& options = flags.options;
  options.on_progress = [&printer](const data::PrepareProgress& p) { printer.update(p); };
  options.should_stop = [&signals, &stop_signal] {
    for (const int signo : signals.take()) {
      if (signo != SIGCHLD && stop_signal == 0) stop_signal = signo;
    }
    return stop_signal != 0;
  };
  const Stopwatch clock;
  try {
    const data::PrepareProgress done = data::prepare(options, *tokenizer);
    printer.finish(done, clock.seconds(), data::token_dtype_for_vocabulary(tokenizer->vocab_size()), options.output);
    return kExitOk;
  } catch (const data::PrepareInterrupted&) {
    printer.clear();
    std::cerr << kName << ": interrupted by signal " << stop_signal << " (" << strsignal(stop_signal)
              << "); nothing written to " << options.output << ".bin/.idx\n";
    return 128 + stop_signal;
  } catch (...) {
    printer.clear();
    throw;
  }
}

}  // namespace

int data_prepare_command(const std::vector<std::string>& args) {
  CLI::App cli(
      "giant data prepare --input FILE... --tokenizer SPEC --output PREFIX [flags]:\n"
      "tokenizes text or JSON lines into Megatron's PREFIX.bin + PREFIX.idx (one sequence per document).\n"
      "A .jsonl/.json file holds one JSON object a line, its text under --json-key; any other file is\n"
      "plain text, one document per run of lines between empty lines. Token ids are uint16 when the\n"
      "vocabulary allows, int32 otherwise. Exit status: 0 done, 1 failed, 2 bad flags or input.",
      kName);
  PrepareFlags flags;
  add_flags(cli, flags);
  if (const auto code = parse_command_line(cli, args)) return *code;
  apply_global_flags(flags.global);
  try {
    return run_prepare(flags);
  } catch (const FormatError& e) {  // an input that cannot be read or parsed
    std::cerr << kName << ": " << e.what() << '\n';
    return kExitBadInput;
  } catch (const std::exception& e) {
    return report_failure(kName, e);
  }
}

}  // namespace giant::app
