// giant_sentencepiece_fuzz [--iterations N] [--seconds S] [--seed S]:
// feeds mutated SentencePiece models (.model files, made at start by
// spm_train on the bundled corpus: a unigram model with NFKC's rules and a
// BPE model without) to the
// tokenizer's loader. Each input must either load, and then encode and
// decode a text with every id inside the vocabulary, or be a giant::Error
// (a ConfigError naming data.tokenizer for a model that does not load);
// anything else (another exception, a crash, an input that hangs) is a
// failure. Exit status: 0 no failure, 1 a failure, 2 bad flags.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_driver.h"
#include "giant/base/error.h"
#include "giant/data/sentencepiece_tokenizer.h"

namespace giant::data::fuzz {
namespace {

namespace fs = std::filesystem;
using giant::fuzz::Inconsistent;
using giant::fuzz::read_file;
using giant::fuzz::Target;
using giant::fuzz::Verdict;

const std::string kText = "In the beginning God created the heaven and the earth. 123 \xc3\xa9\xe2\x82\xac \xf0\x9f\x98\x80";

// spm_train's model of `type` over the corpus's first 100 KB: small, so that
// each input loads fast.
std::string train_model(const fs::path& folder, const std::string& type, const std::string& normalization) {
  const fs::path input = folder / "input.txt";
  if (!fs::exists(input)) {
    std::ofstream(input, std::ios::binary) << read_file(fs::path(GIANT_SOURCE_DIR) / "examples/data/kjv.txt").substr(0, 100000);
  }
  const fs::path prefix = folder / (type + "-" + normalization);
  const std::string command = std::string("'") + GIANT_SPM_TRAIN + "' --input='" + input.string() +
                              "' --model_prefix='" + prefix.string() + "' --model_type=" + type +
                              " --normalization_rule_name=" + normalization +
                              " --vocab_size=150 --character_coverage=1.0 --minloglevel=2 > '" + prefix.string() +
                              ".log' 2>&1";
  if (std::system(command.c_str()) != 0) {
    throw std::runtime_error("spm_train failed (scripts/setup-deps installs it): " + read_file(prefix.string() + ".log"));
  }
  return read_file(prefix.string() + ".model");
}

Verdict feed(const fs::path& file, const std::string& input) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << input;
  try {
    const SentencePieceTokenizer tokenizer("sentencepiece:fuzz.model", file.string());
    const std::vector<int32_t> ids = tokenizer.encode(kText);
    for (int32_t id : ids) {
      if (id < 0 || id >= tokenizer.vocab_size()) throw Inconsistent("an id outside the vocabulary");
    }
    tokenizer.decode(ids);
    return Verdict::accepted;
  } catch (const Error&) {
    return Verdict::refused;  // a ConfigError for a model that does not load; a named error for one that cannot encode
  }
}

std::vector<Target> targets() {
  auto workspace = std::make_shared<giant::fuzz::TempFolder>("giant-spm-fuzz");
  const fs::path file = workspace->path() / "fuzz.model";
  Target model{"sentencepiece_model",
               // NFKC's rules are most of a model's bytes (and of its loading time): one seed has them.
               {train_model(workspace->path(), "unigram", "nmt_nfkc"),
                train_model(workspace->path(), "bpe", "identity")},
               [workspace, file](const std::string& input) { return feed(file, input); }};
  model.max_pool_input = 1 << 20;  // the models themselves are tens of kilobytes
  return {model};
}

}  // namespace
}  // namespace giant::data::fuzz

int main(int argc, char** argv) {
  return giant::fuzz::fuzz_main(argc, argv, "Fuzzes the SentencePiece model loader.", "giant_sentencepiece_fuzz",
                                giant::data::fuzz::targets);
}
