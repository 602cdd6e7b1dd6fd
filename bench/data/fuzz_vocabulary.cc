// giant_vocabulary_fuzz --iterations N --seed S: feeds mutated GPT-2
// vocabularies (vocab.json and merges.txt, one of the two mutated per input)
// to the loader. Each input must either load or be a ConfigError naming the
// file; anything else (another exception, a crash) is a failure, reported
// with the mutated file in hex. What loads must be self-consistent: every
// merge joins two tokens whose bytes, together, are a token's.
//
// Prints one line (accepted: the inputs that loaded):
//   fuzz target=gpt2_vocabulary iterations=N failures=F seconds=S accepted=K
// and exits 1 on the first failure, 2 on bad flags.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/data/byte_unicode.h"
#include "giant/data/gpt2_vocabulary.h"
#include "fuzz_main.h"
#include "mutator.h"

namespace giant::data::fuzz {
namespace {

namespace fs = std::filesystem;
using checkpoint::fuzz::hex_dump;
using checkpoint::fuzz::Mutator;

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
    if (a < 0 || b < 0 || a >= n || b >= n) throw std::logic_error("a merge names an id past the vocabulary");
    if (!known.count(v.token_bytes[a] + v.token_bytes[b])) throw std::logic_error("a merge makes no token");
  }
}

int run(int64_t iterations, uint64_t seed) {
  Mutator random(seed);
  const Files original = seed_vocabulary();
  std::string pattern = (fs::temp_directory_path() / "giant-vocabulary-fuzz-XXXXXX").string();
  const fs::path folder = ::mkdtemp(pattern.data());
  const Stopwatch clock;
  int64_t done = 0, accepted = 0;
  int failures = 0;
  for (; done < iterations && failures == 0; ++done) {
    Files input = original;
    std::string& mutated = random.below(2) == 0 ? input.vocab : input.merges;
    mutated = random.mutate(mutated, {original.vocab, original.merges});
    std::ofstream(folder / kGpt2VocabFile, std::ios::binary | std::ios::trunc) << input.vocab;
    std::ofstream(folder / kGpt2MergesFile, std::ios::binary | std::ios::trunc) << input.merges;
    try {
      try {
        check_consistent(load_gpt2_vocabulary(folder.string()));
        ++accepted;
      } catch (const ConfigError&) {
        // The expected answer to a bad file.
      }
    } catch (const std::exception& e) {
      std::cerr << "fuzz target=gpt2_vocabulary: not a ConfigError (" << typeid(e).name() << "): " << e.what()
                << "\nmutated file (" << mutated.size() << " bytes):\n"
                << hex_dump(mutated) << std::endl;
      ++failures;
    }
  }
  std::error_code ignored;
  fs::remove_all(folder, ignored);
  std::cout << "fuzz target=gpt2_vocabulary iterations=" << done << " failures=" << failures
            << " seconds=" << clock.seconds() << " accepted=" << accepted << std::endl;
  return failures;
}

}  // namespace
}  // namespace giant::data::fuzz

int main(int argc, char** argv) {
  return giant::checkpoint::fuzz::fuzz_main(
      argc, argv, "Fuzzes the GPT-2 vocabulary loader (vocab.json and merges.txt).", "giant_vocabulary_fuzz",
      giant::data::fuzz::run);
}
