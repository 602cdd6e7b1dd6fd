// SentencePiece through make_tokenizer("sentencepiece:FILE.model"): models
// made at test time by spm_train on part of the bundled corpus; encode and
// decode round trip, the eos id as end of document (and -1 without one),
// errors naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/tokenizer.h"

namespace giant::data {
namespace {

const std::string kKjv = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";
const std::string kSpmTrain = GIANT_SPM_TRAIN;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string temp_dir() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "giant_spm_" + std::to_string(::getpid());
    std::system(("rm -rf '" + d + "' && mkdir -p '" + d + "'").c_str());
    return d;
  }();
  return dir;
}

// Trains a 1000-piece model, every character of it covered, on the corpus's first 600 KB (a few seconds) with
// extra spm_train flags; returns its .model path.
std::string train_model(const std::string& name, const std::string& flags) {
  const std::string input = temp_dir() + "/input.txt";
  if (read_file(input).empty()) {
    std::ofstream out(input, std::ios::binary);
    out << read_file(kKjv).substr(0, 600000);
  }
  const std::string prefix = temp_dir() + "/" + name;
  const std::string command = "'" + kSpmTrain + "' --input='" + input + "' --model_prefix='" + prefix +
                              "' --vocab_size=1000 --character_coverage=1.0 --minloglevel=2 " + flags + " > '" + prefix + ".log' 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << read_file(prefix + ".log")
                                             << (kSpmTrain.find("NOTFOUND") != std::string::npos
                                                     ? "spm_train is not installed: run scripts/setup-deps"
                                                     : "");
  return prefix + ".model";
}

// Without removing extra whitespace (spm_train's default collapses runs of spaces, which the corpus has)
// and with byte fallback (characters the training text lacks, such as 'Q' here, become bytes): a model
// that keeps any text as it is, so decode(encode(x)) == x.
const Tokenizer& model() {
  static const std::unique_ptr<Tokenizer> tokenizer =
      make_tokenizer("sentencepiece:" + train_model("unigram", "--remove_extra_whitespaces=false --byte_fallback=true"));
  return *tokenizer;
}

std::vector<std::string> kjv_lines(size_t count) {
  std::istringstream in(read_file(kKjv));
  std::vector<std::string> lines;
  for (std::string line; lines.size() < count && std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

TEST(SentencePiece, EncodeAndDecodeRoundTrip) {
  EXPECT_EQ(model().vocab_size(), 1000);
  size_t tokens = 0, bytes = 0;
  // Lines past the training text too (the model has not seen them).
  std::vector<std::string> lines = kjv_lines(20000);
  for (const std::string& line : lines) {
    const std::vector<int32_t> ids = model().encode(line);
    ASSERT_EQ(model().decode(ids), line);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 1000) << id;
    tokens += ids.size();
    bytes += line.size();
  }
  EXPECT_LT(tokens, bytes * 2 / 5) << "1000 pieces (256 of them bytes) of this text should average 2.5+ bytes";
  EXPECT_TRUE(model().encode("").empty());
  EXPECT_EQ(model().decode({}), "");
}

TEST(SentencePiece, EndOfDocumentIsTheModelsEos) {
  EXPECT_EQ(model().end_of_document(), 2);  // spm_train's default: unk 0, bos 1, eos 2
  const auto moved = make_tokenizer("sentencepiece:" + train_model("eos7", "--eos_id=7 --unk_id=0 --bos_id=1"));
  EXPECT_EQ(moved->end_of_document(), 7);
  const std::string path = train_model("no_eos", "--eos_id=-1 --model_type=bpe");
  const auto none = make_tokenizer("sentencepiece:" + path);
  EXPECT_EQ(none->end_of_document(), -1);
  EXPECT_EQ(none->name(), "sentencepiece:" + path);
  const std::string line = "In the beginning God created the heaven and the earth.";
  EXPECT_EQ(none->decode(none->encode(line)), line);
}

TEST(SentencePiece, ThreadsShareOneModel) {
  const std::vector<std::string> lines = kjv_lines(4000);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& line : lines) expected.push_back(model().encode(line));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < lines.size(); i += 2) mismatches[t] += model().encode(lines[i]) != expected[i];
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// Inside the giant command, beside libtorch's protobuf: libsentencepiece's
// own protobuf would clash with it if it were linked in (the command would
// crash at start); the module keeps them apart. One tiny training step.
TEST(SentencePiece, TrainsInsideTheGiantCommandBesideLibtorch) {
  const std::string out = temp_dir() + "/run";
  const std::string log = temp_dir() + "/run.log";
  const std::string command = "'" + std::string(GIANT_BINARY_DIR) + "/giant' train --set data.tokenizer='\"sentencepiece:" +
                              train_model("cli", "") + "\"' --set model.vocab=1000 --set model.layers=1 "
                              "--set model.hidden=32 --set model.heads=2 --set model.seq_len=16 --set train.steps=1 "
                              "--set train.eval_every=0 --set train.sample_tokens=8 --set train.out_dir='\"" + out +
                              "\"' --set data.path='\"" + kKjv + "\"' > '" + log + "' 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << read_file(log);
  EXPECT_TRUE(contains(read_file(log), "giant train: done: 1 steps")) << read_file(log);
}

TEST(SentencePiece, BadFilesAndIdsAreNamed) {
  auto error = [](const std::string& spec) {
    try {
      make_tokenizer(spec);
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "data.tokenizer");
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  std::string m = error("sentencepiece:/nonexistent/m.model");
  EXPECT_TRUE(contains(m, "SentencePiece model '/nonexistent/m.model': No such file")) << m;
  m = error("sentencepiece:" + kKjv);
  EXPECT_TRUE(contains(m, "SentencePiece model '" + kKjv + "' does not load")) << m;
  m = error("sentencepiece:" + std::string(GIANT_SOURCE_DIR));
  EXPECT_TRUE(contains(m, "is not a file")) << m;
  m = error("sentencepiece:");
  EXPECT_TRUE(contains(m, "names no model")) << m;
  try {
    model().decode({5, 1000});
    ADD_FAILURE() << "decoded id 1000";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "token id 1000 at position 1 is outside the vocabulary [0, 1000)")) << e.what();
  }
}

// Found by bench/data/fuzz_sentencepiece.cc: a model whose pieces include
// an empty one makes libsentencepiece's trie builder throw from inside
// Load, an exception that crossed the module's C interface and escaped the
// tokenizer. It is the model's error now.
TEST(SentencePiece, AModelLibsentencepieceThrowsOnIsAConfigError) {
  const unsigned char model_bytes[] = {
      0x0a, 0x0e, 0x0a, 0x05, 0x3c, 0x54, 0x6e, 0x6b, 0x3f, 0x15, 0x00, 0x20, 0x00, 0x00, 0x18, 0x02, 0x0a, 0x0c,
      0x0a, 0x0a, 0x00, 0x7c, 0x2f, 0x73, 0x3e, 0x15, 0x80, 0x01, 0x00, 0x00, 0x18, 0x03, 0x0a, 0x09, 0x0a, 0x02,
      0x74, 0x69, 0x15, 0x00, 0x00, 0x20, 0x80, 0x0a, 0x0c, 0x0a, 0x05, 0xe2, 0xb6, 0x81, 0x54, 0x28, 0x15, 0x4a,
      0x02, 0x6e, 0x64, 0x15, 0x02, 0x00, 0x00, 0xc0, 0x0a, 0x0b, 0x0a, 0x04, 0xe2, 0x9e, 0x81, 0x21, 0x15, 0x00,
      0x40, 0x41, 0xc1, 0x0a, 0x0d, 0x0a, 0x06, 0xe2, 0x96, 0xa1, 0x75, 0x68, 0x65, 0x15, 0x20, 0x40, 0x80, 0xc2};
  const std::string path = temp_dir() + "/empty_piece.model";
  std::ofstream(path, std::ios::binary) << std::string(reinterpret_cast<const char*>(model_bytes), sizeof model_bytes);
  try {
    make_tokenizer("sentencepiece:" + path);
    FAIL() << "the model loaded";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.tokenizer");
    EXPECT_TRUE(contains(e.what(), "does not load")) << e.what();
    EXPECT_TRUE(contains(e.what(), "libsentencepiece failed")) << e.what();
  }
}

}  // namespace
}  // namespace giant::data
