// A GPT-2 style byte-level BPE vocabulary as files hold it: vocab.json (token
// text -> id) and merges.txt (one merge "a b" per line, rank = order), or
// OpenAI's encoder.json and vocab.bpe for the same.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace giant::data {

struct Gpt2Vocabulary {
  std::vector<std::string> token_bytes;  // by id: the raw bytes each token stands for
  // By rank: the ids a merge joins. Both and their concatenation are tokens.
  std::vector<std::pair<int32_t, int32_t>> merges;
  int32_t end_of_document = -1;  // the id of <|endoftext|>, -1 without one
};

// The file names a vocabulary folder uses: vocab.json + merges.txt, or
// encoder.json + vocab.bpe where there is no vocab.json.
struct Gpt2Files {
  std::string vocab;
  std::string merges;
};
Gpt2Files gpt2_files(const std::string& dir);
// The first form's names (Hugging Face's too): what copies are called.
constexpr const char* kGpt2VocabFile = "vocab.json";
constexpr const char* kGpt2MergesFile = "merges.txt";

// Reads and checks the vocabulary in `dir`. A missing folder or file, bad
// JSON, ids that are not 0..N-1 once each, a token that is not byte-level
// text, a missing byte token, or a bad merges line (with its number) ->
// ConfigError("data.tokenizer", ...) naming the file and what is wrong.
Gpt2Vocabulary load_gpt2_vocabulary(const std::string& dir);

}  // namespace giant::data
