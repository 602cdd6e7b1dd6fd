// giant data prepare's work: documents from text or JSON lines files,
// tokenized by N worker threads in batches, written in input order by one
// writer to Megatron's PREFIX.bin/.idx, so the output is the same bytes for
// any N. Memory stays bounded: a few batches of about a MiB of text each
// are in flight per worker, whatever the inputs' sizes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/tokenizer.h"

namespace giant::data {

struct PrepareProgress {
  uint64_t input_bytes_done = 0;   // of the documents written so far
  uint64_t input_bytes_total = 0;  // the inputs' sizes (0 for pipes, whose size is unknown)
  int64_t documents = 0, tokens = 0;
  double seconds = 0;  // since prepare started
};

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string output;  // PREFIX
  std::string json_key = "text";
  bool append_eod = false;
  int workers = 1;
  // Called from the writing thread after each batch is written.
  std::function<void(const PrepareProgress&)> on_progress;
  // Polled by the writing thread; true stops the run with PrepareInterrupted.
  std::function<bool()> should_stop;
};

// The run was stopped by should_stop; nothing was left under PREFIX.
class PrepareInterrupted : public Error {
 public:
  using Error::Error;
};

// Tokenizes options.inputs in order into options.output's .bin/.idx, in
// token_dtype_for_vocabulary(tokenizer.vocab_size()), one sequence per
// document, with tokenizer.end_of_document() after each when append_eod.
// Inputs are all opened before the output is created. Bad input (a file that
// cannot be read, a bad JSON line) -> FormatError naming the file (and line);
// append_eod with a tokenizer that has no end-of-document id, or workers < 1
// -> ConfigError naming the flag. Any failure leaves no PREFIX.bin/.idx
// (nor their .tmp files). Returns the final progress.
PrepareProgress prepare(const PrepareOptions& options, const Tokenizer& tokenizer);

}  // namespace giant::data
