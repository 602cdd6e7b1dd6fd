// Learning a GPT-2 style byte-level BPE from text files: the vocabulary
// giant data train-tokenizer writes and gpt2:DIR loads.
//
// The text is read as the GPT-2 tokenizer reads it (valid UTF-8, cut into
// pieces by GPT-2's pattern), each distinct piece counted once; then merges
// are learned one at a time, each the adjacent pair of symbols that occurs
// most often over all pieces (weighted by their counts), pair counts being
// updated only where the merge changed a piece. Ties go to the pair whose
// left token id is smallest, then right token id: the result depends only on
// the text and the vocabulary size.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "giant/data/gpt2_vocabulary.h"

namespace giant::data {

struct BpeTrainingProgress {
  int64_t merges_done = 0;
  int64_t merges_total = 0;
  double seconds = 0;  // since the merges began
};

struct BpeTrainingStats {
  int64_t bytes = 0;           // read from the files
  int64_t pieces = 0;          // pre-tokens in the text
  int64_t distinct_pieces = 0;
  int64_t merges = 0;          // learned (fewer than asked when no pair is left to merge)
  double count_seconds = 0;    // reading and counting
  double merge_seconds = 0;
};

struct BpeTrainingOptions {
  // Tokens in all: the 256 bytes (ids 0-255, id = byte value), then one per
  // merge in order, then <|endoftext|>. At least 257.
  int64_t vocab_size = 0;
  std::function<void(const BpeTrainingProgress&)> on_progress;  // now and then while merging, and at the end
  size_t read_block = 4 << 20;  // bytes read at a time (tests make it small: the result is the same)
};

// Learns a vocabulary from `files`. An unreadable file or a vocab_size
// below 257 -> ConfigError ("FILES" or "--vocab-size"); `stats`, if given, is filled.
Gpt2Vocabulary train_bpe(const std::vector<std::string>& files, const BpeTrainingOptions& options,
                         BpeTrainingStats* stats = nullptr);

// Whether `dir` can take a vocabulary: ConfigError("--output") when it holds
// vocab.json or merges.txt already, or is a file (checked before training too).
void check_vocabulary_output(const std::string& dir);

// Writes `vocabulary` as DIR/vocab.json (token text -> id, in id order) and
// DIR/merges.txt ("#version: 0.2", then one merge per line), creating DIR.
// Existing files in DIR -> ConfigError("--output"); write errors -> giant::Error naming the file.
void write_gpt2_vocabulary(const Gpt2Vocabulary& vocabulary, const std::string& dir);

}  // namespace giant::data
