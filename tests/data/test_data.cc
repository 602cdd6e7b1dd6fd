// giant_data: the byte tokenizer, the corpus split and the global sample order.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/corpus.h"
#include "giant/data/sampler.h"
#include "giant/data/tokenizer.h"

namespace giant::data {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A file under the test's temporary directory, removed when the test ends.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& contents)
      : path_(::testing::TempDir() + "giant_data_" + std::to_string(::getpid()) + "_" + name) {
    std::ofstream out(path_, std::ios::binary);
    out << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<int32_t> iota_tokens(int64_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>(i % 1000);
  return tokens;
}

TEST(ByteTokenizer, RoundTripsAllBytes) {
  std::string text;
  for (int b = 0; b < 256; ++b) text.push_back(static_cast<char>(b));
  ByteTokenizer tokenizer;
  EXPECT_EQ(tokenizer.name(), "byte");
  EXPECT_EQ(tokenizer.vocab_size(), 256);
  std::vector<int32_t> tokens = tokenizer.encode(text);
  ASSERT_EQ(tokens.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tokens[static_cast<size_t>(b)], b);
  EXPECT_EQ(tokenizer.decode(tokens), text);
  EXPECT_TRUE(tokenizer.encode("").empty());
  EXPECT_EQ(tokenizer.decode({}), "");
}

TEST(ByteTokenizer, DecodeRejectsIdsOutOfRange) {
  ByteTokenizer tokenizer;
  for (int32_t bad : {256, -1, 1 << 20}) {
    try {
      tokenizer.decode({65, bad});
      FAIL() << "no throw for " << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), std::to_string(bad))) << e.what();
      EXPECT_TRUE(contains(e.what(), "position 1")) << e.what();
    }
  }
}

TEST(MakeTokenizer, KnownAndUnknownNames) {
  auto tokenizer = make_tokenizer("byte");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->name(), "byte");
  try {
    make_tokenizer("gpt2-bpe");
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.tokenizer");
    EXPECT_TRUE(contains(e.what(), "gpt2-bpe")) << e.what();
    EXPECT_TRUE(contains(e.what(), "'byte'")) << e.what();  // lists the known names
  }
}

// What a checkpoint copies of a tokenizer, and the spec reading the copies.
TEST(TokenizerFiles, CopiesTakeFixedNamesWhateverTheSourceCallsThem) {
  EXPECT_TRUE(tokenizer_files("byte").empty());
  EXPECT_EQ(tokenizer_spec_in("byte", "/ckpt"), "byte");

  const std::string openai = ::testing::TempDir() + "giant_data_openai_" + std::to_string(::getpid());
  std::filesystem::create_directories(openai);
  std::ofstream(openai + "/encoder.json") << "{}";
  const std::vector<TokenizerFile> gpt2 = tokenizer_files("gpt2:" + openai);
  ASSERT_EQ(gpt2.size(), 2u);
  EXPECT_EQ(gpt2[0].path, openai + "/encoder.json");
  EXPECT_EQ(gpt2[0].name, "vocab.json");
  EXPECT_EQ(gpt2[1].path, openai + "/vocab.bpe");
  EXPECT_EQ(gpt2[1].name, "merges.txt");
  std::filesystem::remove_all(openai);
  const std::vector<TokenizerFile> hf = tokenizer_files("gpt2:tok");
  ASSERT_EQ(hf.size(), 2u);
  EXPECT_EQ(hf[0].path, "tok/vocab.json");
  EXPECT_EQ(hf[1].path, "tok/merges.txt");
  EXPECT_EQ(tokenizer_spec_in("gpt2:tok", "/ckpt/step_00000002"), "gpt2:/ckpt/step_00000002");

  const std::vector<TokenizerFile> spm = tokenizer_files("sentencepiece:models/spm.model");
  ASSERT_EQ(spm.size(), 1u);
  EXPECT_EQ(spm[0].path, "models/spm.model");
  EXPECT_EQ(spm[0].name, "tokenizer.model");
  EXPECT_EQ(tokenizer_spec_in("sentencepiece:models/spm.model", "/ckpt"), "sentencepiece:/ckpt/tokenizer.model");

  for (const std::string bad : {"gpt2-bpe", "gpt2:", "sentencepiece:"}) {
    try {
      tokenizer_files(bad);
      ADD_FAILURE() << "no throw for " << bad;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "data.tokenizer") << bad;
    }
  }
}

TEST(TokenCorpus, LoadsAndSplitsTheTail) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(static_cast<char>('a' + i % 26));
  TempFile file("corpus.txt", text);
  ByteTokenizer tokenizer;
  TokenCorpus corpus = TokenCorpus::load(file.path(), tokenizer, 0.1);
  EXPECT_EQ(corpus.train.size(), 900u);
  EXPECT_EQ(corpus.val.size(), 100u);
  std::vector<int32_t> all = tokenizer.encode(text);
  EXPECT_EQ(corpus.train, std::vector<int32_t>(all.begin(), all.begin() + 900));
  EXPECT_EQ(corpus.val, std::vector<int32_t>(all.begin() + 900, all.end()));

  TokenCorpus half = TokenCorpus::load(file.path(), tokenizer, 0.5);
  EXPECT_EQ(half.train.size(), 500u);
  EXPECT_EQ(half.val.size(), 500u);
}

TEST(TokenCorpus, SplitSizesRound) {
  EXPECT_EQ(TokenCorpus::split(iota_tokens(1000), 0.1).val.size(), 100u);
  EXPECT_EQ(TokenCorpus::split(iota_tokens(1000), 0.0015).val.size(), 1u);  // 1.5 -> 1
  EXPECT_EQ(TokenCorpus::split(iota_tokens(1), 0.5).val.size(), 0u);
  for (int64_t n : {1, 2, 3, 7, 10, 999, 1001}) {
    for (double fraction : {0.001, 0.05, 0.1, 0.25, 0.5}) {
      TokenCorpus corpus = TokenCorpus::split(iota_tokens(n), fraction);
      // The nearest whole count, a tie going to train.
      double exact = static_cast<double>(n) * fraction;
      auto val = static_cast<double>(corpus.val.size());
      EXPECT_LE(std::abs(val - exact), 0.5) << n << " " << fraction;
      if (std::abs(val - exact) == 0.5) {
        EXPECT_LT(val, exact) << n << " " << fraction;
      }
      EXPECT_EQ(corpus.train.size() + corpus.val.size(), static_cast<size_t>(n));
      EXPECT_GE(corpus.train.size(), corpus.val.size());
    }
  }
}

TEST(TokenCorpus, MissingFileNamesKeyAndFile) {
  ByteTokenizer tokenizer;
  std::string path = ::testing::TempDir() + "giant_data_no_such_file.txt";
  try {
    TokenCorpus::load(path, tokenizer, 0.1);
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.path");
    EXPECT_TRUE(contains(e.what(), "cannot read '" + path + "'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "No such file")) << e.what();
  }
}

TEST(TokenCorpus, DirectoryAndEmptyFileAreErrors) {
  ByteTokenizer tokenizer;
  try {
    TokenCorpus::load(::testing::TempDir(), tokenizer, 0.1);
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.path");
    EXPECT_TRUE(contains(e.what(), "cannot read")) << e.what();
  }
  TempFile empty("empty.txt", "");
  try {
    TokenCorpus::load(empty.path(), tokenizer, 0.1);
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.path");
    EXPECT_TRUE(contains(e.what(), empty.path())) << e.what();
    EXPECT_TRUE(contains(e.what(), "empty")) << e.what();
  }
}

TEST(TokenCorpus, ValFractionOutOfRange) {
  ByteTokenizer tokenizer;
  TempFile file("small.txt", "hello world");
  for (double bad : {0.0, -0.1, 0.51, 1.0, std::nan("")}) {
    try {
      TokenCorpus::load(file.path(), tokenizer, bad);
      FAIL() << "no throw for " << bad;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "data.val_fraction");
    }
  }
}

TEST(SequenceSampler, SameSeedSameOrderDifferentSeedDifferent) {
  const int64_t n = 100000, seq = 128, samples = 1000;
  SequenceSampler a(n, seq, 42, "train"), b(n, seq, 42, "train"), c(n, seq, 43, "train");
  int64_t differing = 0;
  for (int64_t i = 0; i < samples; ++i) {
    EXPECT_EQ(a.start(i), b.start(i));
    differing += a.start(i) != c.start(i);
  }
  EXPECT_GT(differing, samples * 9 / 10);
  // Nor is one seed's order a shift of the next seed's.
  int64_t shifted = 0;
  for (int64_t i = 0; i + 1 < samples; ++i) shifted += a.start(i + 1) == c.start(i);
  EXPECT_LT(shifted, 5);
}

TEST(SequenceSampler, IndependentOfCallOrder) {
  SequenceSampler sampler(5000, 16, 7, "train");
  std::vector<int64_t> forward;
  for (int64_t i = 0; i < 200; ++i) forward.push_back(sampler.start(i));
  SequenceSampler fresh(5000, 16, 7, "train");
  for (int64_t i = 199; i >= 0; --i) EXPECT_EQ(fresh.start(i), forward[static_cast<size_t>(i)]);
  // Far indices need no walk through the ones before them.
  EXPECT_EQ(fresh.start(1'000'000'007), sampler.start(1'000'000'007));
}

TEST(SequenceSampler, OffsetsInRangeAndSpread) {
  // Tight cases first: exactly seq_len+1 tokens leaves one possible start.
  SequenceSampler tight(17, 16, 1, "train");
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(tight.start(i), 0);

  const int64_t n = 1000, seq = 10, range = n - seq;  // starts in [0, 989]
  SequenceSampler sampler(n, seq, 123, "train");
  std::vector<int64_t> hits(static_cast<size_t>(range), 0);
  const int64_t samples = 200000;
  for (int64_t i = 0; i < samples; ++i) {
    int64_t s = sampler.start(i);
    ASSERT_GE(s, 0);
    ASSERT_LE(s, n - seq - 1);
    ++hits[static_cast<size_t>(s)];
  }
  // Roughly uniform: every start is hit, and each of ten bins holds about a tenth.
  for (int64_t h : hits) EXPECT_GT(h, 0);
  for (int bin = 0; bin < 10; ++bin) {
    int64_t in_bin = 0;
    for (int64_t s = bin * range / 10; s < (bin + 1) * range / 10; ++s) in_bin += hits[static_cast<size_t>(s)];
    EXPECT_NEAR(static_cast<double>(in_bin) / samples, 0.1, 0.01) << "bin " << bin;
  }
}

TEST(SequenceSampler, WindowMatchesRawTokens) {
  std::vector<int32_t> tokens = iota_tokens(3000);
  for (auto& t : tokens) t = (t * 37 + 11) % 256;
  const int64_t seq = 32, count = 9, first = 5;
  SequenceSampler sampler(static_cast<int64_t>(tokens.size()), seq, 99, "train");
  std::vector<int32_t> window(seq + 1, -1);
  for (int64_t r = 0; r < count; ++r) {
    sampler.window(tokens, first + r, window.data());
    int64_t s = sampler.start(first + r);
    for (int64_t t = 0; t <= seq; ++t) EXPECT_EQ(window[static_cast<size_t>(t)], tokens[static_cast<size_t>(s + t)]);
  }
  // The last possible window ends at the last token: no read past the end.
  SequenceSampler tight(static_cast<int64_t>(tokens.size()), 2999, 0, "train");
  std::vector<int32_t> whole(3000);
  tight.window(tokens, 0, whole.data());
  EXPECT_EQ(whole.back(), tokens.back());
  EXPECT_EQ(whole.front(), tokens.front());
  // A token vector of another size is a caller mistake.
  EXPECT_THROW(sampler.window(iota_tokens(100), 0, window.data()), Error);
}

TEST(SequenceSampler, SeqLenTooLargeNamesKey) {
  try {
    SequenceSampler sampler(100, 100, 0, "validation");
    FAIL() << "no throw";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "model.seq_len");
    EXPECT_TRUE(contains(e.what(), "larger than the data allows")) << e.what();
    EXPECT_TRUE(contains(e.what(), "validation has 100 tokens")) << e.what();
    EXPECT_TRUE(contains(e.what(), "101")) << e.what();
  }
  EXPECT_NO_THROW(SequenceSampler(101, 100, 0, "train"));
  EXPECT_THROW(SequenceSampler(100, 0, 0, "train"), ConfigError);
  EXPECT_THROW(SequenceSampler(1000, 8, 0, "train").start(-1), Error);
}

// Samples [first, first + count) of the order, back to back.
std::vector<int32_t> windows(const SequenceSampler& sampler, const std::vector<int32_t>& tokens, int64_t first,
                             int64_t count) {
  const auto size = static_cast<size_t>(sampler.seq_len() + 1);
  std::vector<int32_t> out(static_cast<size_t>(count) * size);
  for (int64_t r = 0; r < count; ++r) sampler.window(tokens, first + r, out.data() + static_cast<size_t>(r) * size);
  return out;
}

TEST(SequenceSampler, RankSlicesReproduceTheGlobalOrder) {
  std::vector<int32_t> tokens = iota_tokens(20000);
  const int64_t seq = 24;
  SequenceSampler sampler(static_cast<int64_t>(tokens.size()), seq, 2024, "train");
  for (int64_t dp : {1, 2, 3, 5}) {
    for (int64_t k : {1, 4, 7}) {
      for (int64_t step = 0; step < 3; ++step) {
        const int64_t base = step * dp * k;  // each step's global batch follows the last
        const std::vector<int32_t> whole = windows(sampler, tokens, base, dp * k);
        std::vector<int32_t> sliced;
        for (int64_t r = 0; r < dp; ++r) {
          // A rank uses its own sampler, as it would in its own process.
          SequenceSampler rank_sampler(static_cast<int64_t>(tokens.size()), seq, 2024, "train");
          const std::vector<int32_t> mine = windows(rank_sampler, tokens, base + r * k, k);
          sliced.insert(sliced.end(), mine.begin(), mine.end());
        }
        EXPECT_EQ(sliced, whole) << "dp=" << dp << " k=" << k << " step=" << step;
      }
    }
  }
}

TEST(BundledCorpus, LoadsWithTheDefaultSplit) {
  // The corpus bundled under examples/ loads and leaves room for long sequences.
  const std::string path = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";
  TokenCorpus corpus = TokenCorpus::load(path, ByteTokenizer(), 0.05);
  EXPECT_GT(corpus.train.size(), 3'000'000u);
  EXPECT_GT(corpus.val.size(), 100'000u);
  EXPECT_NO_THROW(SequenceSampler(static_cast<int64_t>(corpus.val.size()), 1024, 0, "validation"));
}

}  // namespace
}  // namespace giant::data
