// The README's real-data path end to end: giant data prepare with GPT-2's
// BPE (the vocabulary scripts/setup-deps fetches), then giant train with
// examples/configs/gpt2-bpe.toml on the prepared .bin/.idx, shortened.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/launch_support.h"

namespace giant::train {
namespace {

using test::giant_binary;
using test::losses_of;
using test::read_file;
using test::TempDir;

const std::string kSource = GIANT_SOURCE_DIR;

int run(const std::string& command, const std::string& log) {
  const int status = std::system((command + " > " + log + " 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(RealData, Gpt2PreparedCorpusTrainsWithTheExampleConfig) {
  const std::string vocabulary = GIANT_GPT2_REFERENCE_DIR;
  ASSERT_TRUE(std::filesystem::exists(vocabulary + "/encoder.json"))
      << vocabulary << " is missing: run scripts/setup-deps (it fetches GPT-2's vocabulary)";
  TempDir dir;
  const std::string prefix = dir.path() + "/kjv-gpt2", tokenizer = "gpt2:" + vocabulary;
  ASSERT_EQ(run(giant_binary() + " data prepare --input " + kSource + "/examples/data/kjv.txt --tokenizer " +
                    tokenizer + " --output " + prefix + " --append-eod --workers 2",
                dir.path() + "/prepare.log"),
            0)
      << read_file(dir.path() + "/prepare.log");
  ASSERT_TRUE(std::filesystem::exists(prefix + ".bin") && std::filesystem::exists(prefix + ".idx"));

  const std::string out = dir.path() + "/run";
  const std::string train = giant_binary() + " train " + kSource + "/examples/configs/gpt2-bpe.toml" +
                            " --set data.path=\\\"" + prefix + "\\\" --set data.tokenizer=\\\"" + tokenizer +
                            "\\\" --set train.out_dir=\\\"" + out + "\\\" --set model.layers=1 --set model.seq_len=64" +
                            " --set train.steps=3 --set train.eval_every=0 --set train.eval_batches=1" +
                            " --set train.sample_tokens=12 --set train.precision=\\\"fp32\\\" --set train.threads=1";
  ASSERT_EQ(run(train, dir.path() + "/train.log"), 0) << read_file(dir.path() + "/train.log");
  const std::string log = read_file(dir.path() + "/train.log");
  EXPECT_NE(log.find("(.bin/.idx)"), std::string::npos) << log;
  const std::vector<double> losses = losses_of(out + "/metrics.jsonl");
  ASSERT_GE(losses.size(), 3u);
  // A fresh model over 50,257 tokens starts near ln(50257) = 10.8.
  EXPECT_NEAR(losses.front(), std::log(50257.0), 0.5);
  for (double loss : losses) EXPECT_TRUE(std::isfinite(loss));
  EXPECT_FALSE(read_file(out + "/sample.txt").empty());

  // A model too small for the vocabulary is refused before training, naming the key.
  EXPECT_EQ(run(train + " --set model.vocab=256", dir.path() + "/small.log"), 2);
  EXPECT_NE(read_file(dir.path() + "/small.log").find("model.vocab"), std::string::npos);
}

// SentencePiece in a libtorch process (giant data prepare and giant train
// both are): libsentencepiece's bundled protobuf must not meet libtorch's.
TEST(RealData, SentencePiecePreparedCorpusTrains) {
  TempDir dir;
  const std::string text = dir.file("part.txt", read_file(kSource + "/examples/data/kjv.txt").substr(0, 300000));
  const std::string model = dir.path() + "/spm";
  ASSERT_EQ(run(std::string(GIANT_SPM_TRAIN) + " --input=" + text + " --model_prefix=" + model +
                    " --vocab_size=500 --minloglevel=2",
                dir.path() + "/spm.log"),
            0)
      << read_file(dir.path() + "/spm.log") << " (spm_train comes with scripts/setup-deps)";
  const std::string prefix = dir.path() + "/part", tokenizer = "sentencepiece:" + model + ".model";
  ASSERT_EQ(run(giant_binary() + " data prepare --input " + text + " --tokenizer " + tokenizer + " --output " + prefix +
                    " --append-eod",
                dir.path() + "/prepare.log"),
            0)
      << read_file(dir.path() + "/prepare.log");
  const std::string out = dir.path() + "/run";
  ASSERT_EQ(run(giant_binary() + " train --set model.layers=1 --set model.hidden=32 --set model.heads=2" +
                    " --set model.seq_len=32 --set model.vocab=500 --set train.global_batch=4 --set train.micro_batch=4" +
                    " --set train.steps=2 --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=8" +
                    " --set train.precision=\\\"fp32\\\" --set train.threads=1 --set data.path=\\\"" + prefix +
                    "\\\" --set data.tokenizer=\\\"" + tokenizer + "\\\" --set train.out_dir=\\\"" + out + "\\\"",
                dir.path() + "/train.log"),
            0)
      << read_file(dir.path() + "/train.log");
  const std::vector<double> losses = losses_of(out + "/metrics.jsonl");
  ASSERT_GE(losses.size(), 2u);
  EXPECT_NEAR(losses.front(), std::log(500.0), 0.5);
}

}  // namespace
}  // namespace giant::train
