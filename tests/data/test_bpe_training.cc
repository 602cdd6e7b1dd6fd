// BPE training (giant data train-tokenizer): a vocabulary learned from the
// bundled corpus loads through gpt2:DIR and encodes the corpus losslessly;
// two trainings write identical files; ties follow the stated rule; reading
// in small blocks counts what one read counts; the command's flags, progress
// line and errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/support/files.h"
#include "giant/base/error.h"
#include "giant/base/utf8.h"
#include "giant/data/bpe_training.h"
#include "giant/data/tokenizer.h"

namespace giant::data {
namespace {

const std::string kKjv = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";
const std::string kAwkward = std::string(GIANT_SOURCE_DIR) + "/tests/data/data/gpt2_awkward.txt";
const std::string kGiant = std::string(GIANT_BINARY_DIR) + "/giant";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using test::read_file;
using test::write_file;

// A path under the test's temporary directory that does not exist yet.
std::string fresh_path(const std::string& name) {
  const std::string path = ::testing::TempDir() + "giant_bpe_" + std::to_string(::getpid()) + "_" + name;
  std::system(("rm -rf '" + path + "'").c_str());
  return path;
}

Gpt2Vocabulary train(const std::vector<std::string>& files, int64_t vocab_size, size_t read_block = 4 << 20) {
  BpeTrainingOptions options;
  options.vocab_size = vocab_size;
  options.read_block = read_block;
  return train_bpe(files, options);
}

void expect_same(const Gpt2Vocabulary& a, const Gpt2Vocabulary& b) {
  EXPECT_EQ(a.token_bytes, b.token_bytes);
  EXPECT_EQ(a.merges, b.merges);
  EXPECT_EQ(a.end_of_document, b.end_of_document);
}

TEST(BpeTraining, KjvVocabularyLoadsAndEncodesTheCorpusLosslessly) {
  const std::string dir = fresh_path("kjv");
  std::vector<int64_t> reported;
  BpeTrainingOptions options;
  options.vocab_size = 3000;
  options.on_progress = [&](const BpeTrainingProgress& p) {
    EXPECT_EQ(p.merges_total, 3000 - 257);
    reported.push_back(p.merges_done);
  };
  BpeTrainingStats stats;
  const Gpt2Vocabulary vocabulary = train_bpe({kKjv}, options, &stats);
  ASSERT_EQ(vocabulary.token_bytes.size(), 3000u);
  EXPECT_EQ(vocabulary.merges.size(), 3000u - 257);
  EXPECT_EQ(vocabulary.end_of_document, 2999);
  EXPECT_EQ(stats.bytes, static_cast<int64_t>(read_file(kKjv).size()));
  ASSERT_FALSE(reported.empty());
  EXPECT_EQ(reported.back(), 3000 - 257);
  EXPECT_TRUE(std::is_sorted(reported.begin(), reported.end()));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(vocabulary.token_bytes[b], std::string(1, static_cast<char>(b)));
  write_gpt2_vocabulary(vocabulary, dir);
  EXPECT_EQ(read_file(dir + "/merges.txt").rfind("#version: 0.2\n", 0), 0u);

  const auto tokenizer = make_tokenizer("gpt2:" + dir);
  EXPECT_EQ(tokenizer->vocab_size(), 3000);
  EXPECT_EQ(tokenizer->end_of_document(), 2999);
  const std::string kjv = read_file(kKjv);
  const std::vector<int32_t> ids = tokenizer->encode(kjv);
  EXPECT_EQ(tokenizer->decode(ids), kjv);
  EXPECT_LT(ids.size(), kjv.size() / 3) << "a 3000-token vocabulary of this text should make tokens of 3+ bytes";
  const std::string awkward = read_file(kAwkward);
  EXPECT_EQ(tokenizer->decode(tokenizer->encode(awkward)), valid_utf8(awkward));
}

TEST(BpeTraining, TwoTrainingsWriteIdenticalFiles) {
  const std::string a = fresh_path("a"), b = fresh_path("b");
  write_gpt2_vocabulary(train({kKjv, kAwkward}, 1500), a);
  write_gpt2_vocabulary(train({kKjv, kAwkward}, 1500), b);
  EXPECT_EQ(read_file(a + "/vocab.json"), read_file(b + "/vocab.json"));
  EXPECT_EQ(read_file(a + "/merges.txt"), read_file(b + "/merges.txt"));
  try {
    write_gpt2_vocabulary(train({kAwkward}, 300), a);
    ADD_FAILURE() << "wrote over an existing vocabulary";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "--output");
    EXPECT_TRUE(contains(e.what(), "already has vocab.json")) << e.what();
  }
}

// Small blocks cut pieces and characters (the awkward file's ill-formed
// bytes among them) at every place: the counts, so the merges, are those of
// one read.
TEST(BpeTraining, ReadingInBlocksLearnsWhatOneReadLearns) {
  const std::string sample = fresh_path("sample.txt");
  write_file(sample, read_file(kKjv).substr(0, 200000));
  for (size_t block : {1, 2, 3, 7, 1000}) {
    expect_same(train({kAwkward}, 600, block), train({kAwkward}, 600));
  }
  expect_same(train({sample}, 800, 4093), train({sample}, 800));
}

// The most frequent pair first; equal counts go to the smallest (left, right) ids.
TEST(BpeTraining, MergesTheMostFrequentPairAndBreaksTiesBySmallestIds) {
  const std::string file = fresh_path("ties.txt");
  // Pieces "ab", " cd": pairs (a,b), (' ',c), (c,d) once each. (' ',c) has the smallest left id; then
  // (a,b) and (" c",d) are left, once each, and a's id is the smaller.
  write_file(file, "ab cd");
  Gpt2Vocabulary v = train({file}, 260);
  using Merges = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(v.merges, (Merges{{' ', 'c'}, {'a', 'b'}, {256, 'd'}}));
  // (x,y) 4 times, (y,x) twice, (' ',x), (' ',z), (z,z) once each; then ("xy","xy") twice beats the pairs
  // with ' ' (once each), although ' ' has the smaller id.
  write_file(file, "xyxy xyxy zz");
  v = train({file}, 259);
  EXPECT_EQ(v.merges, (Merges{{'x', 'y'}, {256, 256}}));
  // Fewer merges than asked when no pair is left: "aaaa" gives "aa", then "aaaa".
  write_file(file, "aaaa");
  v = train({file}, 400);
  EXPECT_EQ(v.merges, (Merges{{'a', 'a'}, {256, 256}}));
  EXPECT_EQ(v.token_bytes.size(), 259u);
  EXPECT_EQ(v.token_bytes[257], "aaaa");
  EXPECT_EQ(v.token_bytes[258], "<|endoftext|>");
}

TEST(BpeTraining, BadOptionsAndUnreadableFilesAreConfigErrors) {
  auto key_of = [](const std::vector<std::string>& files, int64_t vocab_size) {
    try {
      train(files, vocab_size);
    } catch (const ConfigError& e) {
      return e.key() + ": " + e.what();
    }
    return std::string("(no error)");
  };
  EXPECT_TRUE(contains(key_of({kKjv}, 256), "--vocab-size: '--vocab-size': must be at least 257")) << key_of({kKjv}, 256);
  EXPECT_TRUE(contains(key_of({}, 300), "FILES")) << key_of({}, 300);
  EXPECT_TRUE(contains(key_of({kKjv, "/nonexistent.txt"}, 300), "cannot read '/nonexistent.txt': No such file"))
      << key_of({kKjv, "/nonexistent.txt"}, 300);
  EXPECT_TRUE(contains(key_of({GIANT_SOURCE_DIR}, 300), "is a folder")) << key_of({GIANT_SOURCE_DIR}, 300);
}

struct Outcome {
  int code;
  std::string err;
};

Outcome giant(const std::string& args) {
  const std::string err = fresh_path("stderr.txt");
  const int status = std::system(("'" + kGiant + "' data train-tokenizer " + args + " > /dev/null 2> '" + err + "'").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(err)};
}

TEST(TrainTokenizerCommand, TrainsWithAProgressLineAndRefusesBadFlags) {
  const std::string dir = fresh_path("cli");
  Outcome o = giant("--vocab-size 1000 --output " + dir + " " + kKjv);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(contains(o.err, "merges 743/743 (100%)")) << o.err;
  EXPECT_TRUE(contains(o.err, "merges/s")) << o.err;
  EXPECT_TRUE(contains(o.err, "vocabulary of 1000 tokens (<|endoftext|> = 999)")) << o.err;
  EXPECT_EQ(make_tokenizer("gpt2:" + dir)->vocab_size(), 1000);
  // The command writes what the library learns.
  const std::string lib = fresh_path("lib");
  write_gpt2_vocabulary(train({kKjv}, 1000), lib);
  EXPECT_EQ(read_file(dir + "/merges.txt"), read_file(lib + "/merges.txt"));
  EXPECT_EQ(read_file(dir + "/vocab.json"), read_file(lib + "/vocab.json"));

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--output " + dir + "x " + kKjv, "--vocab-size is required"},
      {"--vocab-size 1000 " + kKjv, "--output is required"},
      {"--vocab-size 1000 --output " + dir + "x", "files is required"},
      {"--vocab-size ten --output " + dir + "x " + kKjv, "--vocab-size"},
      {"--vocab-size 100 --output " + dir + "x " + kKjv, "must be at least 257"},
      {"--vocab-size 1000 --output " + dir + "x /nonexistent.txt", "cannot read '/nonexistent.txt'"},
      {"--vocab-size 1000 --output " + dir + " " + kKjv, "already has vocab.json"},
      {"--vocab-size 1000 --output " + kKjv + " " + kKjv, "is a file, not a folder"},
  };
  for (const auto& [args, message] : bad) {
    o = giant(args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_TRUE(contains(o.err, message)) << args << "\n" << o.err;
  }
}

}  // namespace
}  // namespace giant::data
