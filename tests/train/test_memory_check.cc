// The memory check before training: the planner's prediction for the run
// against train.memory_limit_gb (or the host's share), refused with what
// fits instead, before any work; a run that fits trains.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/train/memory_check.h"
#include "giant/train/run_config.h"
#include "giant/train/trainer.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

namespace fs = std::filesystem;
using test::keys_with;
using test::TempDir;

// 4 layers of hidden 128, 8 sequences of 128 in fp32: about 0.07 GiB by
// the planner (activations 0.05 of it), over a 0.05 GiB limit.
std::vector<std::string> large_run(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> o = {"model.layers=4",        "model.hidden=128",     "model.heads=4",
                                "model.seq_len=128",     "train.global_batch=8", "train.micro_batch=8",
                                "train.memory_limit_gb=0.05"};
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

std::string refusal(const RunConfig& config, int world_size, std::string* key = nullptr) {
  try {
    check_memory_fits(config, world_size);
  } catch (const ConfigError& e) {
    if (key) *key = e.key();
    return e.what();
  }
  return "";
}

TEST(MemoryCheck, ARunThatDoesNotFitIsRefusedWithWhatFits) {
  const RunConfig config = run_config_from(keys_with(large_run()));
  const MemoryCheck check = predict_rank_memory(config, 1);
  EXPECT_FALSE(check.fits());
  EXPECT_EQ(check.limit_source, "train.memory_limit_gb");
  std::string key;
  const std::string why = refusal(config, 1, &key);
  std::printf("%s\n", why.c_str());
  EXPECT_EQ(key, "train.memory_limit_gb");
  EXPECT_NE(why.find("0.05 GiB"), std::string::npos) << why;
  EXPECT_NE(why.find("activations"), std::string::npos) << why;
  EXPECT_NE(why.find("the planner suggests train.recompute = \"selective\""), std::string::npos) << why;
  // What it suggests fits.
  EXPECT_EQ(refusal(run_config_from(keys_with(large_run({"train.recompute=\"selective\""}))), 1), "");
}

TEST(MemoryCheck, TwoRanksAreToldTheZeroStageThatFits) {
  // Model states dominate: 2 layers of hidden 512 on 2 ranks at ZeRO-0.
  const RunConfig config = run_config_from(
      keys_with({"model.layers=2", "model.hidden=512", "model.heads=4", "model.seq_len=16", "train.global_batch=2",
                 "train.micro_batch=1", "parallel.dp=2", "parallel.zero=0", "train.memory_limit_gb=0.08"}));
  const MemorySuggestion s = suggest_fitting_change(config, 2, 0.08 * (1 << 30));
  EXPECT_EQ(s.key, "parallel.zero") << s.setting;
  EXPECT_LE(s.bytes, 0.08 * (1 << 30));
  EXPECT_NE(refusal(config, 2).find("the planner suggests parallel.zero = "), std::string::npos);
  // ZeRO-3 holds the least model state per rank.
  RunConfig three = config;
  three.layout.zero = 3;
  RunConfig one = config;
  one.layout.zero = 1;
  EXPECT_LT(predict_rank_memory(three, 2).predicted.model_states, predict_rank_memory(one, 2).predicted.model_states);
}

TEST(MemoryCheck, NothingFitsSaysSo) {
  RunConfig config = run_config_from(keys_with(large_run({"train.memory_limit_gb=0.001"})));
  std::string key;
  const std::string why = refusal(config, 1, &key);
  EXPECT_NE(why.find("No change of ZeRO stage, recomputation, micro-batch or tp/pp split fits"), std::string::npos)
      << why;
  EXPECT_EQ(key, "train.memory_limit_gb");  // the user set it: raising it is one way out
  EXPECT_NE(why.find("or run on more ranks, or raise train.memory_limit_gb."), std::string::npos) << why;
}

// Without train.memory_limit_gb, a model too large for anything is refused
// naming the model key to change, in a whole sentence, and not blaming the
// limit nobody set.
TEST(MemoryCheck, AModelTooLargeForAnyLayoutNamesTheModelKey) {
  const RunConfig config = run_config_from(keys_with({"model.seq_len=100000000"}));
  std::string key;
  const std::string why = refusal(config, 1, &key);
  std::printf("%s\n", why.c_str());
  EXPECT_EQ(key, "model.seq_len") << why;
  EXPECT_EQ(why.find("memory_limit_gb"), std::string::npos) << why;
  EXPECT_NE(why.find("make the model smaller (model.seq_len first, or model.hidden or model.layers) or run on more "
                     "ranks."),
            std::string::npos)
      << why;
  EXPECT_EQ(why.back(), '.') << why;
  // Where the layers hold the memory, they are the key named.
  std::string layers_key;
  refusal(run_config_from(keys_with({"model.layers=100000", "model.seq_len=16"})), 1, &layers_key);
  EXPECT_EQ(layers_key, "model.layers");
}

TEST(MemoryCheck, WithoutALimitTheHostsShareOfItsMemory) {
  const RunConfig config = run_config_from(keys_with({}));
  const MemoryCheck check = predict_rank_memory(config, 2);
  EXPECT_TRUE(check.fits());
  EXPECT_NE(check.limit_source.find("shared by 2 rank(s)"), std::string::npos) << check.limit_source;
  EXPECT_GT(check.limit_bytes, 0);
}

// The trainer refuses it before any work (no output folder), and a small
// run under the same limit trains.
TEST(MemoryCheck, TheTrainerChecksBeforeTraining) {
  TempDir dir;
  const std::string data = dir.file("text.txt", std::string(4000, 'a'));
  const std::vector<std::string> run = {"data.path=\"" + data + "\"", "train.out_dir=\"" + dir.path() + "/out\"",
                                        "train.steps=2", "train.threads=1", "train.eval_every=0",
                                        "train.eval_batches=1", "train.sample_tokens=0"};
  std::vector<std::string> large = large_run(run);
  std::ostringstream out;
  try {
    Trainer(run_config_from(keys_with(large)), "", out, false);
    FAIL() << "a run predicted not to fit 0.05 GiB was not refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "train.memory_limit_gb");
    EXPECT_NE(std::string(e.what()).find("the planner suggests"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/out"));

  std::vector<std::string> small = {"model.layers=1",     "model.hidden=32",       "model.heads=2",
                                    "model.seq_len=16",   "train.global_batch=4",  "train.micro_batch=2",
                                    "train.memory_limit_gb=0.05"};
  small.insert(small.end(), run.begin(), run.end());
  const TrainSummary summary = Trainer(run_config_from(keys_with(small)), "", out, false).run();
  EXPECT_GT(summary.first_loss, 0);
  EXPECT_TRUE(fs::exists(dir.path() + "/out"));
}

}  // namespace
}  // namespace giant::train
