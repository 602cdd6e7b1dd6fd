// giant_vocabulary_fuzz [--iterations N] [--seconds S] [--seed S] [--target
// vocab_json|merges]: feeds mutated GPT-2 vocabularies (vocab.json or
// merges.txt mutated, the other file intact) to the loader. Each input must either load or be a ConfigError naming the
// file; anything else (another exception, a crash) is a failure, reported
// with the mutated file in hex. What loads must be self-consistent: every
// merge joins two tokens whose bytes, together, are a token's.
//
// The command line and output are bench/fuzz's (fuzz_driver.h).

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/byte_unicode.h"
#include "giant/data/gpt2_vocabulary.h"
#include "fuzz_driver.h"
#include "mutator.h"

namespace giant::data::fuzz {
namespace {

namespace fs = std::filesystem;
using giant::fuzz::Inconsistent;
using giant::fuzz::Target;
using giant::fuzz::Verdict;

struct Files {
  std::string vocab, merges;
};

// JSON's escapes for the token texts that need them.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The 256 byte tokens, a few merges of them and <|endoftext|>.
Files seed_vocabulary() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(bytes_to_token_text(std::string(1, static_cast<char>(b))));
  const std::vector<std::pair<std::string, std::string>> merges = {{"t", "h"}, {"th", "e"}, {"a", "n"}, {"an", "d"}};
  std::string merges_text = "#version: 0.2\n";
  for (const auto& [a, b] : merges) {
    merges_text += a + " " + b + "\n";
    tokens.push_back(a + b);
  }
  tokens.push_back("<|endoftext|>");
  std::string vocab = "{";
  for (size_t id = 0; id < tokens.size(); ++id) {
    vocab += (id ? ", " : "") + json_string(tokens[id]) + ": " + std::to_string(id);
  }
  return {vocab + "}", merges_text};
}

void check_consistent(const Gpt2Vocabulary& v) {
  const std::set<std::string> known(v.token_bytes.begin(), v.token_bytes.end());
  for (const auto& [a, b] : v.merges) {
    const auto n = static_cast<int32_t>(v.token_bytes.size());
    if (a < 0 || b < 0 || a >= n || b >= n) throw Inconsistent("a merge names an id past the vocabulary");
    if (!known.count(v.token_bytes[a] + v.token_bytes[b])) throw Inconsistent("a merge makes no token");
  }
}

// Loads the vocabulary from files, one of them the input: ConfigError is
// the expected answer to a bad file.
class VocabularyTarget {
 public:
  VocabularyTarget() : original_(seed_vocabulary()) {}
  const Files& original() const { return original_; }
  Verdict feed(const Files& input) {
    std::ofstream(folder_.path() / kGpt2VocabFile, std::ios::binary | std::ios::trunc) << input.vocab;
    std::ofstream(folder_.path() / kGpt2MergesFile, std::ios::binary | std::ios::trunc) << input.merges;
    try {
      check_consistent(load_gpt2_vocabulary(folder_.path().string()));
      return Verdict::accepted;
    } catch (const ConfigError&) {
      return Verdict::refused;
    }
  }

 private:
  Files original_;
  giant::fuzz::TempFolder folder_{"giant-vocabulary-fuzz"};
};

std::vector<Target> targets() {
  auto files = std::make_shared<VocabularyTarget>();
  const Files& original = files->original();
  Target vocab{"vocab_json", {original.vocab}, [files](const std::string& input) {
                 return files->feed({input, files->original().merges});
               }};
  Target merges{"merges", {original.merges}, [files](const std::string& input) {
                  return files->feed({files->original().vocab, input});
                }};
  vocab.max_pool_input = merges.max_pool_input = 1 << 16;
  return {vocab, merges};
}

}  // namespace
}  // namespace giant::data::fuzz

int main(int argc, char** argv) {
  return giant::fuzz::fuzz_main(argc, argv, "Fuzzes the GPT-2 vocabulary loader (vocab.json and merges.txt).",
                                "giant_vocabulary_fuzz", giant::data::fuzz::targets);
}
