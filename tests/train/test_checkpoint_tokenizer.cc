// A checkpoint carries its tokenizer: trained with a gpt2: or sentencepiece:
// tokenizer named relative to where training ran, giant generate works from
// any other folder once the original files are moved away; the copies are
// checked like the checkpoint's other files; giant checkpoint export writes
// them beside the weights and an import of that export carries them again.
// A checkpoint from before (no copies) reads its tokenizer where
// data.tokenizer says, as it always did.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "train/support/launch_support.h"

namespace {

namespace fs = std::filesystem;
using giant::train::test::giant_binary;
using giant::train::test::read_file;
using giant::train::test::TempDir;

const std::string kCorpus = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

struct Outcome {
  int code;
  std::string out, err;
};

// `giant ARGS` run in folder `cwd` (relative paths in ARGS are from there).
Outcome giant_in(const std::string& cwd, const std::string& args) {
  const std::string out = cwd + "/.stdout", err = cwd + "/.stderr";
  const std::string command = "cd '" + cwd + "' && " + giant_binary() + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return {code, read_file(out), read_file(err)};
}

// A two-step run in `work` (which holds corpus.txt) with data.tokenizer
// `tokenizer` and model.vocab `vocab`, its checkpoints in work/run/checkpoints.
void train_in(const std::string& work, const std::string& tokenizer, int vocab) {
  const Outcome trained = giant_in(
      work, "train --set model.layers=1 --set model.hidden=32 --set model.heads=2 --set model.seq_len=32"
            " --set model.vocab=" + std::to_string(vocab) +
            " --set train.global_batch=4 --set train.micro_batch=4 --set train.steps=2 --set train.eval_every=0"
            " --set train.eval_batches=1 --set train.sample_tokens=0 --set train.precision=fp32"
            " --set train.threads=1 --set data.path=corpus.txt"
            " --set data.tokenizer=" + tokenizer + " --set train.out_dir=run");
  ASSERT_EQ(trained.code, 0) << trained.out << trained.err;
}

// Greedy text from `checkpoint`, generated in folder `cwd`.
Outcome greedy_text(const std::string& cwd, const std::string& checkpoint) {
  return giant_in(cwd, "generate " + checkpoint + " --prompt 'And God' --max-tokens 12 --temperature 0");
}

// A folder work/ holding a slice of the bundled corpus, and elsewhere/.
std::string make_work_folder(const TempDir& dir) {
  const std::string work = dir.path() + "/work";
  fs::create_directories(work);
  fs::create_directories(dir.path() + "/elsewhere");
  std::ofstream(work + "/corpus.txt") << read_file(kCorpus).substr(0, 60000);
  return work;
}

TEST(CheckpointTokenizer, Gpt2FilesTravelWithTheCheckpointAndItsExport) {
  TempDir dir("giant-ckpt-tokenizer");
  const std::string d = dir.path(), work = make_work_folder(dir);
  ASSERT_EQ(giant_in(work, "data train-tokenizer --vocab-size 300 --output tok corpus.txt").code, 0);
  train_in(work, "gpt2:tok", 300);
  const std::string vocab = read_file(work + "/tok/vocab.json"), merges = read_file(work + "/tok/merges.txt");
  const Outcome before = greedy_text(work, "run/checkpoints");
  ASSERT_EQ(before.code, 0) << before.err;

  // The original vocabulary moved away, generation run from another folder.
  fs::rename(work + "/tok", d + "/moved");
  const Outcome after = greedy_text(d + "/elsewhere", "../work/run/checkpoints");
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_EQ(after.out, before.out);
  EXPECT_EQ(after.out.rfind("And God", 0), 0u) << after.out;
  const fs::path step = fs::path(work) / "run/checkpoints/step_00000002";
  EXPECT_EQ(read_file((step / "vocab.json").string()), vocab);
  EXPECT_EQ(read_file((step / "merges.txt").string()), merges);
  const Outcome info = giant_in(d, "checkpoint info " + step.string());
  EXPECT_NE(info.out.find("tokenizer: gpt2:tok (carried: merges.txt, vocab.json)"), std::string::npos) << info.out;

  // The export carries them (transformers' names), and so does an import of it.
  ASSERT_EQ(giant_in(d, "checkpoint export --format hf-gpt2 work/run/checkpoints hf").code, 0);
  EXPECT_EQ(read_file(d + "/hf/vocab.json"), vocab);
  EXPECT_EQ(read_file(d + "/hf/merges.txt"), merges);
  ASSERT_EQ(giant_in(d, "checkpoint export --format hf-gpt2 work/run/checkpoints hf").code, 0);  // replaced
  ASSERT_EQ(giant_in(d, "checkpoint import --format hf-gpt2 hf imported").code, 0);
  fs::remove_all(d + "/hf");
  const Outcome imported = greedy_text(d + "/elsewhere", "../imported");
  ASSERT_EQ(imported.code, 0) << imported.err;
  EXPECT_EQ(imported.out, before.out);

  // A changed copy is caught like any changed file of the checkpoint.
  std::ofstream(step / "vocab.json", std::ios::app) << " ";
  const Outcome verified = giant_in(d, "checkpoint verify " + step.string());
  EXPECT_EQ(verified.code, 1);
  EXPECT_NE((verified.out + verified.err).find("vocab.json"), std::string::npos) << verified.out << verified.err;
  const Outcome refused = greedy_text(d + "/elsewhere", "../work/run/checkpoints");
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find("vocab.json"), std::string::npos) << refused.err;
}

TEST(CheckpointTokenizer, SentencePieceModelTravelsWithTheCheckpoint) {
  TempDir dir("giant-ckpt-tokenizer");
  const std::string d = dir.path(), work = make_work_folder(dir);
  const std::string spm = std::string(GIANT_SPM_TRAIN) + " --input=" + work + "/corpus.txt --model_prefix=" + work +
                          "/spm --vocab_size=300 --minloglevel=2 > " + d + "/spm.log 2>&1";
  ASSERT_EQ(std::system(spm.c_str()), 0) << read_file(d + "/spm.log") << " (spm_train comes with scripts/setup-deps)";
  train_in(work, "sentencepiece:spm.model", 300);
  const Outcome before = greedy_text(work, "run/checkpoints");
  ASSERT_EQ(before.code, 0) << before.err;
  fs::remove(work + "/spm.model");
  const Outcome after = greedy_text(d + "/elsewhere", "../work/run/checkpoints");
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_EQ(after.out, before.out);
}

// A checkpoint written before checkpoints carried their tokenizer: its
// manifest has no tokenizer_files. It reads data.tokenizer's path, from
// where training ran, as before.
TEST(CheckpointTokenizer, ACheckpointWithoutCopiesReadsWhereDataTokenizerSays) {
  TempDir dir("giant-ckpt-tokenizer");
  const std::string d = dir.path(), work = make_work_folder(dir);
  ASSERT_EQ(giant_in(work, "data train-tokenizer --vocab-size 300 --output tok corpus.txt").code, 0);
  train_in(work, "gpt2:tok", 300);
  const fs::path step = fs::path(work) / "run/checkpoints/step_00000002";
  nlohmann::json manifest = nlohmann::json::parse(read_file((step / "manifest.json").string()));
  manifest.erase("tokenizer_files");
  nlohmann::json files = nlohmann::json::array();
  for (const auto& file : manifest.at("files")) {
    const std::string name = file.at("name");
    if (name == "vocab.json" || name == "merges.txt") {
      fs::remove(step / name);
    } else {
      files.push_back(file);
    }
  }
  manifest["files"] = files;
  std::ofstream(step / "manifest.json") << manifest.dump(1) << "\n";
  ASSERT_EQ(giant_in(d, "checkpoint verify " + step.string()).code, 0);
  const Outcome in_work = greedy_text(work, "run/checkpoints");
  EXPECT_EQ(in_work.code, 0) << in_work.err;
  EXPECT_EQ(in_work.out.rfind("And God", 0), 0u) << in_work.out;
  const Outcome elsewhere = greedy_text(d + "/elsewhere", "../work/run/checkpoints");
  EXPECT_NE(elsewhere.code, 0);
  EXPECT_NE(elsewhere.err.find("tok"), std::string::npos) << elsewhere.err;
}

}  // namespace
