// giant_data: the sample orders of indexed datasets (permutation, GPT
// samples, blending) and open_datasets' splits and errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "giant/base/error.h"
#include "giant/data/blend.h"
#include "giant/data/dataset.h"
#include "giant/data/gpt_samples.h"
#include "giant/data/indexed_dataset.h"
#include "giant/data/permutation.h"

namespace giant::data {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(IndexPermutation, IsABijectionForEverySize) {
  for (uint64_t n : {1u, 2u, 3u, 5u, 16u, 17u, 100u, 1000u, 4097u, 65536u}) {
    IndexPermutation p(n, 42);
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t x = p(i);
      ASSERT_LT(x, n);
      ASSERT_FALSE(seen[x]) << "n=" << n << " repeats " << x;
      seen[x] = true;
    }
  }
}

TEST(IndexPermutation, KeyDecidesTheOrder) {
  IndexPermutation a(1000, 1), b(1000, 1), c(1000, 2);
  int same_as_c = 0, fixed = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a(i), b(i));
    same_as_c += a(i) == c(i);
    fixed += a(i) == i;
  }
  EXPECT_LT(same_as_c, 20);  // about 1 expected
  EXPECT_LT(fixed, 20);
  EXPECT_THROW(a(1000), Error);
}

TEST(GptSampleOrder, EachEpochVisitsEverySampleOnce) {
  const int64_t tokens = 1001, seq = 10;  // 100 samples of 11 tokens, overlapping by one
  GptSampleOrder order(tokens, seq, 7, "test");
  ASSERT_EQ(order.samples_per_epoch(), 100);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> starts;
    for (int64_t i = 0; i < 100; ++i) {
      const int64_t s = order.start(epoch * 100 + i);
      EXPECT_EQ(s % seq, 0);
      EXPECT_LE(s + seq + 1, tokens);
      starts.insert(s);
    }
    EXPECT_EQ(starts.size(), 100u) << "epoch " << epoch;
  }
  int same = 0;
  for (int64_t i = 0; i < 100; ++i) same += order.start(i) == order.start(100 + i);
  EXPECT_LT(same, 10) << "epochs must be shuffled differently";
  GptSampleOrder other_seed(tokens, seq, 8, "test");
  int same_seed = 0;
  for (int64_t i = 0; i < 100; ++i) same_seed += order.start(i) == other_seed.start(i);
  EXPECT_LT(same_seed, 10);
}

TEST(GptSampleOrder, TooFewTokensNamesSeqLen) {
  EXPECT_NO_THROW(GptSampleOrder(11, 10, 0, "x"));
  try {
    GptSampleOrder(10, 10, 0, "books's training split");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "model.seq_len");
    EXPECT_TRUE(contains(e.what(), "books's training split has 10 tokens")) << e.what();
  }
}

TEST(BlendOrder, KeepsEachShareWithinOneSample) {
  BlendOrder blend({0.7, 0.2, 0.1});
  std::vector<int64_t> taken(3, 0);
  for (int64_t i = 0; i < 100000; ++i) {
    const BlendOrder::Pick pick = blend.at(i);
    ASSERT_EQ(pick.index, taken[static_cast<size_t>(pick.source)]) << "a source's samples come in order";
    ++taken[static_cast<size_t>(pick.source)];
    for (size_t s = 0; s < 3; ++s) {
      ASSERT_LE(std::abs(static_cast<double>(taken[s]) - blend.weights()[s] * static_cast<double>(i + 1)), 1.0)
          << "source " << s << " at sample " << i;
    }
  }
  EXPECT_NEAR(taken[0] / 1e5, 0.7, 0.01);
  EXPECT_NEAR(taken[1] / 1e5, 0.2, 0.01);
  EXPECT_NEAR(taken[2] / 1e5, 0.1, 0.01);
}

TEST(BlendOrder, RandomAccessMatchesSequential) {
  BlendOrder sequential({3, 1}), random({3, 1});  // weights are normalized
  std::vector<BlendOrder::Pick> picks;
  for (int64_t i = 0; i < 20000; ++i) picks.push_back(sequential.at(i));
  for (int64_t i : {19999, 5, 12345, 4096, 4095, 0, 8191, 8192, 17000}) {
    const BlendOrder::Pick p = random.at(i);
    EXPECT_EQ(p.source, picks[static_cast<size_t>(i)].source) << i;
    EXPECT_EQ(p.index, picks[static_cast<size_t>(i)].index) << i;
  }
}

// An indexed dataset under the test's temporary directory: documents of
// ids given by lengths, token t of the whole file having id (t % 1000).
class IndexedFixture : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::vector<int32_t>& lengths) {
    const std::string prefix = dir_ + "/" + name;
    std::filesystem::create_directories(dir_);
    IndexedDatasetWriter writer(prefix, TokenDtype::kUint16);
    int32_t next = 0;
    for (int32_t length : lengths) {
      std::vector<int32_t> doc(static_cast<size_t>(length));
      for (auto& id : doc) id = next++ % 1000;
      writer.add_document(doc);
    }
    writer.finish();
    return prefix;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  DatasetOptions options(std::string path) const {
    DatasetOptions o;
    o.path = std::move(path);
    o.val_fraction = 0.1;
    o.seq_len = 8;
    o.seed = 5;
    o.vocab = 1000;
    return o;
  }
  std::string dir_ = ::testing::TempDir() + "giant_datasets_" + std::to_string(::getpid());
};

TEST_F(IndexedFixture, ValidationTakesTheLastWholeDocuments) {
  // 10 documents of 100 tokens: the last 10% is exactly the last document.
  const std::string prefix = write("ten", std::vector<int32_t>(10, 100));
  ByteTokenizer tokenizer;
  Datasets d = open_datasets(options(prefix), tokenizer);
  EXPECT_EQ(d.train->num_tokens(), 900);
  EXPECT_EQ(d.validation->num_tokens(), 100);
  EXPECT_TRUE(contains(d.description, "in 9 documents")) << d.description;
  std::vector<int32_t> sample(9);
  for (int64_t i = 0; i < 200; ++i) {
    d.train->sample(i, sample.data());
    EXPECT_LT(sample.back() % 1000, 900) << "a training sample never reaches the validation document";
    for (size_t t = 1; t < sample.size(); ++t) EXPECT_EQ(sample[t], (sample[t - 1] + 1) % 1000);
    d.validation->sample(i, sample.data());
    EXPECT_GE(sample.front(), 900);
  }
  // The .bin and .idx names work as the prefix too.
  EXPECT_EQ(open_datasets(options(prefix + ".bin"), tokenizer).train->num_tokens(), 900);
  EXPECT_EQ(open_datasets(options(prefix + ".idx"), tokenizer).train->num_tokens(), 900);
}

TEST_F(IndexedFixture, OrderDependsOnlyOnTheSeed) {
  const std::string prefix = write("order", std::vector<int32_t>(50, 37));
  ByteTokenizer tokenizer;
  Datasets a = open_datasets(options(prefix), tokenizer), b = open_datasets(options(prefix), tokenizer);
  DatasetOptions other = options(prefix);
  other.seed = 6;
  Datasets c = open_datasets(other, tokenizer);
  std::vector<int32_t> x(9), y(9), z(9);
  int same_as_other_seed = 0;
  for (int64_t i = 300; i >= 0; --i) {  // asked backwards: still the same samples
    a.train->sample(i, x.data());
    b.train->sample(300 - i, y.data());
    b.train->sample(i, y.data());
    c.train->sample(i, z.data());
    EXPECT_EQ(x, y);
    same_as_other_seed += x == z;
  }
  EXPECT_LT(same_as_other_seed, 30);
}

TEST_F(IndexedFixture, BlendKeepsSharesAndSourcesApart) {
  const std::string books = write("books", std::vector<int32_t>(40, 50));
  const std::string web = write("web", std::vector<int32_t>(40, 50));
  ByteTokenizer tokenizer;
  DatasetOptions o = options("");
  o.paths = {"0.7", books, "0.3", web + ".idx"};
  Datasets d = open_datasets(o, tokenizer);
  EXPECT_TRUE(contains(d.description, "blend of 2")) << d.description;
  // Each source's own order, seeded apart, is what the blend hands out.
  o.paths = {"1", books};
  Datasets books_only = open_datasets(o, tokenizer);
  std::vector<int32_t> sample(9), expected(9);
  int64_t from_books = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    d.train->sample(i, sample.data());
    books_only.train->sample(from_books, expected.data());
    if (sample == expected) ++from_books;
  }
  EXPECT_NEAR(static_cast<double>(from_books) / 1000, 0.7, 0.01);
}

TEST_F(IndexedFixture, BadBlendsAndSplitsNameTheKey) {
  const std::string one = write("one", {100});
  const std::string ok = write("ok", {50, 50});
  ByteTokenizer tokenizer;
  auto error_of = [&](DatasetOptions o) -> ConfigError {
    try {
      open_datasets(o, tokenizer);
    } catch (const ConfigError& e) {
      return e;
    }
    ADD_FAILURE() << "no ConfigError";
    return ConfigError("", "");
  };
  ConfigError e = error_of(options(one));
  EXPECT_EQ(e.key(), "data.path");
  EXPECT_TRUE(contains(e.what(), "1 document(s)")) << e.what();
  DatasetOptions o = options("");
  o.paths = {"0.5", ok, "0.5"};
  EXPECT_EQ(error_of(o).key(), "data.paths");
  o.paths = {"-1", ok};
  EXPECT_TRUE(contains(error_of(o).what(), "weight '-1'"));
  o.paths = {"heavy", ok};
  EXPECT_TRUE(contains(error_of(o).what(), "weight 'heavy'"));
  o.paths = {"1", dir_ + "/nothing"};
  EXPECT_TRUE(contains(error_of(o).what(), "a prefix needs both " + dir_ + "/nothing.bin and")) << error_of(o).what();
  o = options(ok);
  o.val_fraction = 0.9;
  EXPECT_EQ(error_of(o).key(), "data.val_fraction");
  o = options(ok);
  o.seq_len = 60;  // 50-token documents: too short for a sample
  EXPECT_EQ(error_of(o).key(), "model.seq_len");
}

// A text file named like a prefix (data.path = "notes.bin"), or a prefix
// missing one of its files, is bad input naming the key and what a prefix
// needs, not a runtime failure naming only the missing .idx.
TEST_F(IndexedFixture, APrefixMissingAFileNamesTheKeyAndWhatAPrefixNeeds) {
  std::filesystem::create_directories(dir_);
  const std::string notes = dir_ + "/notes.bin";
  std::ofstream(notes) << "plain text, not tokens\n";
  const std::string half = write("half", {50, 50});
  std::filesystem::remove(half + ".bin");
  ByteTokenizer tokenizer;
  for (const auto& [path, missing] : std::vector<std::pair<std::string, std::string>>{
           {notes, dir_ + "/notes.idx"}, {half, half + ".bin"}, {half + ".idx", half + ".bin"}}) {
    try {
      open_datasets(options(path), tokenizer);
      ADD_FAILURE() << path << ": no error";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "data.path") << e.what();
      EXPECT_TRUE(contains(e.what(), "there is no file " + missing)) << e.what();
      EXPECT_TRUE(contains(e.what(), "a prefix needs both")) << e.what();
      EXPECT_TRUE(contains(e.what(), "giant data prepare")) << e.what();
      if (path == notes) {
        EXPECT_TRUE(contains(e.what(), "a text file to train on directly must not end in .bin or .idx")) << e.what();
      }
    }
  }
}

TEST_F(IndexedFixture, IdsBeyondTheVocabularyNameTheFile) {
  const std::string prefix = write("vocab", std::vector<int32_t>(4, 500));
  ByteTokenizer tokenizer;
  DatasetOptions o = options(prefix);
  o.vocab = 256;  // ids run to 999
  Datasets d = open_datasets(o, tokenizer);
  std::vector<int32_t> sample(9);
  try {
    for (int64_t i = 0; i < 100; ++i) d.train->sample(i, sample.data());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "model.vocab");
    EXPECT_TRUE(contains(e.what(), prefix + ".bin")) << e.what();
  }
}

}  // namespace
}  // namespace giant::data
