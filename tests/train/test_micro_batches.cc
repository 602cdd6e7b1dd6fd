// MicroBatches: a data-parallel rank's samples are its slice of the global
// order, whatever the data source (text file, .bin/.idx prefix, blend), and
// the config keys that choose the source.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "giant/data/dataset.h"
#include "giant/data/indexed_dataset.h"
#include "giant/data/tokenizer.h"
#include "giant/train/micro_batches.h"
#include "support/train_test_support.h"

namespace giant::train {
namespace {

using test::keys_with;
using test::TempDir;

// Every sample a rank reads in `steps` steps, micro-batch by micro-batch, as rows of seq_len inputs.
std::vector<std::vector<int64_t>> rows_of(const RunConfig& c, int dp_rank, int64_t steps) {
  data::ByteTokenizer tokenizer;
  data::DatasetOptions o{c.data.path, c.data.paths, c.data.val_fraction, c.model.seq_len,
                         static_cast<uint64_t>(c.train.seed), c.model.vocab};
  MicroBatches batches(c, data::open_datasets(o, tokenizer), dp_rank);
  std::vector<std::vector<int64_t>> rows;
  for (int64_t step = 0; step < steps; ++step) {
    for (int64_t m = 0; m < batches.per_step(); ++m) {
      const MicroBatch b = batches.train(step, m);
      const int64_t* in = b.inputs.data_ptr<int64_t>();
      const int64_t* out = b.targets.data_ptr<int64_t>();
      for (int64_t r = 0; r < c.layout.micro_batch; ++r) {
        std::vector<int64_t> row(in + r * c.model.seq_len, in + (r + 1) * c.model.seq_len);
        EXPECT_EQ(std::vector<int64_t>(row.begin() + 1, row.end()),
                  std::vector<int64_t>(out + r * c.model.seq_len, out + (r + 1) * c.model.seq_len - 1));
        rows.push_back(std::move(row));
      }
    }
  }
  return rows;
}

// dp=2 reads, step by step, the first and second halves of what dp=1 reads.
void expect_dp2_splits_the_global_order(const std::vector<std::string>& data_keys) {
  std::vector<std::string> base = {"model.seq_len=16", "train.global_batch=8", "train.micro_batch=2"};
  base.insert(base.end(), data_keys.begin(), data_keys.end());
  const RunConfig one = run_config_from(keys_with(base));
  base.push_back("parallel.dp=2");
  const RunConfig two = run_config_from(keys_with(base));
  const auto global = rows_of(one, 0, 3), rank0 = rows_of(two, 0, 3), rank1 = rows_of(two, 1, 3);
  ASSERT_EQ(global.size(), 24u);
  ASSERT_EQ(rank0.size(), 12u);
  for (size_t step = 0; step < 3; ++step) {
    for (size_t r = 0; r < 4; ++r) {
      EXPECT_EQ(rank0[step * 4 + r], global[step * 8 + r]) << "step " << step << " row " << r;
      EXPECT_EQ(rank1[step * 4 + r], global[step * 8 + 4 + r]) << "step " << step << " row " << r;
    }
  }
}

std::string write_prefix(const TempDir& dir, const std::string& name, int32_t documents, int32_t first_id) {
  const std::string prefix = dir.path() + "/" + name;
  data::IndexedDatasetWriter writer(prefix, data::TokenDtype::kUint16);
  for (int32_t d = 0; d < documents; ++d) {
    std::vector<int32_t> doc(100);
    for (int32_t t = 0; t < 100; ++t) doc[static_cast<size_t>(t)] = (first_id + d * 7 + t) % 256;
    writer.add_document(doc);
  }
  writer.finish();
  return prefix;
}

TEST(MicroBatches, DataParallelRanksSplitTheTextOrder) {
  expect_dp2_splits_the_global_order({"data.path=\"" + std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt\""});
}

TEST(MicroBatches, DataParallelRanksSplitTheIndexedOrder) {
  TempDir dir;
  expect_dp2_splits_the_global_order({"data.path=\"" + write_prefix(dir, "corpus", 30, 0) + "\""});
}

TEST(MicroBatches, DataParallelRanksSplitTheBlendedOrder) {
  TempDir dir;
  const std::string a = write_prefix(dir, "a", 30, 0), b = write_prefix(dir, "b", 20, 128);
  expect_dp2_splits_the_global_order({"data.paths=[\"0.6\", \"" + a + "\", 0.4, \"" + b + "\"]"});
}

TEST(RunConfigData, PathsIsAListKey) {
  RunConfig c = run_config_from(keys_with({"data.paths=[\"0.7\", \"books\", 0.3, \"web\"]"}));
  EXPECT_EQ(c.data.paths, (std::vector<std::string>{"0.7", "books", "0.3", "web"}));
  c = run_config_from(keys_with({"data.paths=0.7,books,0.3,web"}));  // the shell's bare words
  EXPECT_EQ(c.data.paths, (std::vector<std::string>{"0.7", "books", "0.3", "web"}));
  EXPECT_TRUE(run_config_from(keys_with({})).data.paths.empty());
  try {
    keys_with({"data.paths=[1, true]"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.paths");
  }
  Tunables keys = keys_with({"data.paths=[\"1\", \"a,b\"]"});  // a TOML array keeps commas in items
  EXPECT_EQ(keys.get_list("data.paths"), (std::vector<std::string>{"1", "a,b"}));
  EXPECT_EQ(keys.value_text("data.paths"), "[\"1\", \"a,b\"]");
}

}  // namespace
}  // namespace giant::train
