// giant checkpoint export|import --format hf-gpt2 as a user runs them: a
// checkpoint exported, imported and exported again gives the same files;
// bad flags and inputs that are not what they should be exit 2 naming
// them, an OUT that cannot be written exits 1; training resumes from an
// imported checkpoint with a fresh optimizer.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <torch/torch.h>

#include "giant/checkpoint/manifest.h"
#include "giant/checkpoint/saver.h"
#include "giant/checkpoint/tensor_slices.h"
#include "giant/models/gpt.h"
#include "giant/parallel/tensor_parallel/splits.h"
#include "train/support/train_test_support.h"

namespace {

namespace fs = std::filesystem;
using giant::train::test::read_file;
using giant::train::test::TempDir;

const std::string kGiant = std::string(GIANT_BINARY_DIR) + "/giant";

struct Outcome {
  int code;
  std::string out, err;
};

Outcome giant(const TempDir& dir, const std::string& args) {
  const std::string out = dir.path() + "/stdout", err = dir.path() + "/stderr";
  const std::string command = kGiant + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, read_file(out), read_file(err)};
}

// A checkpoint.dir holding one checkpoint of a small seeded model.
std::string save_small_checkpoint(const TempDir& dir) {
  giant::models::GptConfig config;
  config.layers = 1;
  config.hidden = 16;
  config.heads = 2;
  config.seq_len = 8;
  config.vocab = 300;  // padded to 320 here, to 384 (vocab_pad 128) by import
  config.vocab_pad = 64;
  auto model = giant::models::gpt_layer_list(config).build_all(3, torch::kFloat);
  const auto splits = giant::parallel::tensor_parallel_splits(*model);
  std::vector<giant::checkpoint::TensorSlice> slices;
  for (const auto& item : model->named_parameters()) {
    const auto split = splits.count(item.key()) ? splits.at(item.key()) : giant::parallel::TensorSplit{};
    for (auto& s : giant::checkpoint::slices_of("model/" + giant::checkpoint::global_parameter_name(item.key()),
                                                item.value().detach(), split, 0, 1)) {
      slices.push_back(std::move(s));
    }
  }
  giant::checkpoint::Manifest meta;
  meta.model = config;
  meta.step = 3;
  const std::string root = dir.path() + "/run";
  giant::checkpoint::CheckpointSaver({root, 3, false, {}, {}}, nullptr).save(meta, slices, {});
  return root;
}

void expect_exit(const TempDir& dir, const std::string& args, int code, const std::string& says) {
  const Outcome r = giant(dir, args);
  EXPECT_EQ(r.code, code) << "giant " << args << "\n" << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << "giant " << args << "\n" << r.err;
  EXPECT_EQ(r.err.find(" at giant/"), std::string::npos) << "an internal check's text:\n" << r.err;
}

TEST(CheckpointConvertCli, ExportImportExportGivesTheSameFiles) {
  TempDir dir("giant-convert-cli");
  const std::string run = save_small_checkpoint(dir), d = dir.path();
  const Outcome exported = giant(dir, "checkpoint export --format hf-gpt2 " + run + " " + d + "/hf");
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_NE(exported.out.find(d + "/hf"), std::string::npos) << exported.out;
  const Outcome imported = giant(dir, "checkpoint import --format=hf-gpt2 " + d + "/hf " + d + "/imported");
  ASSERT_EQ(imported.code, 0) << imported.err;
  EXPECT_TRUE(fs::exists(d + "/imported/manifest.json"));
  const Outcome again = giant(dir, "checkpoint export " + d + "/imported " + d + "/again --format hf-gpt2");
  ASSERT_EQ(again.code, 0) << again.err;
  for (const char* file : {"/config.json", "/model.safetensors"}) {
    EXPECT_EQ(read_file(d + "/hf" + file), read_file(d + "/again" + file)) << file;
  }
  EXPECT_EQ(giant(dir, "checkpoint export --help").code, 0);
  EXPECT_EQ(giant(dir, "checkpoint import --help").code, 0);
}

TEST(CheckpointConvertCli, TrainingStartsFromAnImportedModel) {
  TempDir dir("giant-convert-cli");
  const std::string run = save_small_checkpoint(dir), d = dir.path();
  ASSERT_EQ(giant(dir, "checkpoint export --format hf-gpt2 " + run + " " + d + "/hf").code, 0);
  ASSERT_EQ(giant(dir, "checkpoint import --format hf-gpt2 " + d + "/hf " + d + "/imported").code, 0);
  // The imported model's keys (config.json's, vocab_pad 128), its weights
  // loaded into a layout whose q/k/v pieces are not the file's.
  const Outcome trained = giant(
      dir, "train --set model.layers=1 --set model.hidden=16 --set model.heads=2 --set model.seq_len=8 "
           "--set model.vocab=300 --set train.steps=1 --set train.micro_batch=2 --set train.global_batch=2 "
           "--set train.precision='\"fp32\"' --set train.sample_tokens=0 --set train.eval_batches=1 "
           "--set data.path='\"" + std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt\"' "
           "--set train.out_dir='\"" + d + "/run2\"' --set train.resume='\"" + d + "/imported\"'");
  EXPECT_EQ(trained.code, 0) << trained.err;
  EXPECT_NE((trained.out + trained.err).find("weights only"), std::string::npos) << trained.out << trained.err;
}

TEST(CheckpointConvertCli, BadFlagsAndInputsExit2WriteFailuresExit1) {
  TempDir dir("giant-convert-cli");
  const std::string run = save_small_checkpoint(dir), d = dir.path();
  expect_exit(dir, "checkpoint export " + run + " " + d + "/hf", 2, "--format");
  expect_exit(dir, "checkpoint export --format onnx " + run + " " + d + "/hf", 2, "onnx");
  expect_exit(dir, "checkpoint import --format hf-gpt2 " + d + "/hf", 2, "OUT");
  expect_exit(dir, "checkpoint export --format hf-gpt2 " + d + "/nothing " + d + "/hf", 2, d + "/nothing");
  EXPECT_FALSE(fs::exists(d + "/hf"));

  ASSERT_EQ(giant(dir, "checkpoint export --format hf-gpt2 " + run + " " + d + "/hf").code, 0);
  dir.file("hf/config.json", "{\"model_type\": \"gpt2\", \"vocab_size\": 100}");
  expect_exit(dir, "checkpoint import --format hf-gpt2 " + d + "/hf " + d + "/imported", 2, "'n_positions'");
  EXPECT_FALSE(fs::exists(d + "/imported"));

  fs::create_directories(d + "/mine");
  dir.file("mine/notes.txt", "keep me");
  expect_exit(dir, "checkpoint export --format hf-gpt2 " + run + " " + d + "/mine", 1, "notes.txt");
  EXPECT_EQ(read_file(d + "/mine/notes.txt"), "keep me");
}

}  // namespace
