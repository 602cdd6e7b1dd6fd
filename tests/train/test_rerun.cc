// Reruns say what they do. The keys a checkpoint records and how a resume
// compares them (resume_check.h): another model's, tokenizer's or data's
// checkpoint is refused naming each key that differs with both values;
// changed optimizer and schedule keys are listed and apply; a checkpoint at
// train.steps says what to change. Then as a user meets them, through
// `giant train`: train.resume=auto shows why each candidate is unusable,
// another run's checkpoint exits 2 (on every rank, under giant launch), a
// new train.lr applies from the checkpoint's step on (and a new weight
// decay reaches the optimizer), a rerun with nothing left to train tells
// what to change.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "giant/base/error.h"
#include "giant/checkpoint/checkpoint_dir.h"
#include "giant/train/resume_check.h"
#include "giant/train/run_config.h"
#include "train/support/launch_support.h"

namespace giant::train {
namespace {

namespace fs = std::filesystem;
using test::error_message;
using test::keys_with;
using test::read_file;
using test::run_train;
using test::TempDir;

RunConfig config_with(const std::vector<std::string>& overrides) { return run_config_from(keys_with(overrides)); }

// A manifest as a run with `overrides` saves it at `step`.
checkpoint::Manifest saved_by(const std::vector<std::string>& overrides, int64_t step = 100) {
  const RunConfig config = config_with(overrides);
  checkpoint::Manifest m;
  m.model = config.model;
  m.tokenizer = config.data.tokenizer;
  m.run_keys = run_keys_of(config);
  m.step = step;
  return m;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  return all;
}

TEST(ResumeCheck, PathsAreRecordedAbsolute) {
  const std::string kjv = fs::weakly_canonical(fs::current_path() / "examples/data/kjv.txt").string();
  const auto keys = run_keys_of(config_with({"data.path=\"examples/data/kjv.txt\"", "data.tokenizer=\"gpt2:vocab\""}));
  EXPECT_EQ(keys.at("data.path"), "\"" + kjv + "\"");
  EXPECT_EQ(keys.at("data.tokenizer"), "\"gpt2:" + (fs::current_path() / "vocab").string() + "\"");
  // The same file however it is named is the same data.
  const auto same = run_keys_of(config_with({"data.path=\"./examples/../examples/data/kjv.txt\""}));
  EXPECT_EQ(same.at("data.path"), keys.at("data.path"));
  // A blend's prefixes, not its weights; data.path is then not read.
  const auto blend = run_keys_of(config_with({"data.paths=[\"0.7\", \"books\", \"0.3\", \"/w/web\"]"}));
  EXPECT_EQ(blend.at("data.paths"), "[\"0.7\",\"" + (fs::current_path() / "books").string() + "\",\"0.3\",\"/w/web\"]");
  EXPECT_EQ(blend.at("data.path"), "null");
}

TEST(ResumeCheck, NamesEachDifferingModelTokenizerAndDataKey) {
  const auto saved = saved_by({"data.path=\"/d/a.txt\""});
  EXPECT_TRUE(identity_differences(saved, config_with({"data.path=\"/d/a.txt\""})).empty());
  const RunConfig run = config_with({"data.path=\"/d/b.txt\"", "model.layers=6", "model.seq_len=64",
                                     "data.tokenizer=\"sentencepiece:/t/m.model\"", "data.val_fraction=0.1"});
  EXPECT_EQ(joined(identity_differences(saved, run)),
            "data.path: \"/d/a.txt\" in the checkpoint, \"/d/b.txt\" in this run\n"
            "data.tokenizer: \"byte\" in the checkpoint, \"sentencepiece:/t/m.model\" in this run\n"
            "data.val_fraction: 0.05 in the checkpoint, 0.1 in this run\n"
            "model.layers: 4 in the checkpoint, 6 in this run\n"
            "model.seq_len: 128 in the checkpoint, 64 in this run\n");
  const ConfigError refusal = another_run_error("ck/step_00000100", identity_differences(saved, run));
  EXPECT_EQ(refusal.key(), "train.resume");
  const std::string text = refusal.what();
  EXPECT_NE(text.find("ck/step_00000100 was saved by another run"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  model.layers: 4 in the checkpoint, 6 in this run\n"), std::string::npos) << text;
  EXPECT_NE(text.find("its own train.out_dir"), std::string::npos) << text;
}

TEST(ResumeCheck, LayoutAndTrainingKeysAreNoOtherRun) {
  const auto saved = saved_by({});
  const RunConfig run = config_with({"parallel.dp=2", "parallel.zero=2", "train.micro_batch=8",
                                     "train.precision=\"bf16\"", "train.lr=1e-3", "model.dropout=0.1"});
  EXPECT_EQ(joined(identity_differences(saved, run)), "");
}

TEST(ResumeCheck, ListsChangedTrainingKeysOldToNew) {
  const auto saved = saved_by({});
  EXPECT_TRUE(training_changes(saved, config_with({})).empty());
  const RunConfig run = config_with({"train.lr=1e-3", "train.steps=2000", "train.weight_decay=0",
                                     "train.beta2=0.99", "train.warmup_steps=10", "model.dropout=0.1"});
  std::string all;
  for (const auto& c : training_changes(saved, run)) all += c.key + " " + c.saved + " -> " + c.now + "\n";
  EXPECT_EQ(all,
            "model.dropout 0.0 -> 0.1\n"
            "train.beta2 0.95 -> 0.99\n"
            "train.lr 0.002 -> 0.001\n"
            "train.steps 1000 -> 2000\n"
            "train.warmup_steps 50 -> 10\n"
            "train.weight_decay 0.1 -> 0.0\n");
  const auto notes = resume_notes("ck", saved, run);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("changed since the checkpoint, applied from step 101 on: model.dropout 0.0 -> 0.1, ", 0),
            0u)
      << notes[0];
}

// A checkpoint that predates the record (or an imported one) is compared
// by its model only.
TEST(ResumeCheck, AnUnrecordedKeyIsNotCompared) {
  auto saved = saved_by({});
  saved.run_keys.clear();
  const RunConfig run = config_with({"data.path=\"/elsewhere.txt\"", "train.lr=1e-3"});
  EXPECT_TRUE(identity_differences(saved, run).empty());
  EXPECT_TRUE(training_changes(saved, run).empty());
  EXPECT_EQ(identity_differences(saved, config_with({"model.layers=6"})).size(), 1u);
}

TEST(ResumeCheck, AtTrainStepsSaysWhatToChange) {
  const auto saved = saved_by({"train.steps=100"}, 100);
  // Unchanged: nothing to train, no error (a restarted finished run).
  EXPECT_TRUE(resume_notes("ck", saved, config_with({"train.steps=100"})).empty());
  EXPECT_EQ(nothing_left_to_train("ck", 100),
            "the checkpoint ck is at train.steps = 100: nothing left to train (raise train.steps to train on; "
            "train.resume=\"\" or another train.out_dir starts afresh)");
  // A changed key that would never apply is refused, naming train.steps.
  const std::string changed = error_message([&] { resume_notes("ck", saved, config_with({"train.steps=100", "train.lr=1e-3"})); });
  EXPECT_NE(changed.find("'train.steps': is 100 and the checkpoint ck is at step 100, so nothing is left to train"),
            std::string::npos)
      << changed;
  EXPECT_NE(changed.find("(train.lr 0.002 -> 0.001) would not apply: raise train.steps above 100"), std::string::npos)
      << changed;
  // A run shortened to end at the checkpoint: nothing to apply.
  const auto longer = saved_by({"train.steps=1000"}, 100);
  EXPECT_TRUE(resume_notes("ck", longer, config_with({"train.steps=100"})).empty());
  const std::string beyond = error_message([&] { resume_notes("ck", longer, config_with({"train.steps=50"})); });
  EXPECT_NE(beyond.find("'train.steps': is 50 but the checkpoint ck is at step 100: raise train.steps above 100"),
            std::string::npos)
      << beyond;
}

// --- giant train, as a user meets it ---------------------------------------

const std::string kData = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

// A tiny run at a constant learning rate, checkpointed every step.
std::string train_args(const std::string& out, int steps, const std::string& extra) {
  return "--set model.layers=2 --set model.hidden=32 --set model.heads=4 --set model.seq_len=16 "
         "--set train.global_batch=4 --set train.micro_batch=4 --set train.threads=1 --set train.eval_every=0 "
         "--set train.eval_batches=1 --set train.sample_tokens=0 --set train.precision=fp32 "
         "--set data.val_fraction=0.2 --set train.lr=3e-3 --set train.min_lr=1e-4 --set train.warmup_steps=0 "
         "--set checkpoint.every=1 --set train.steps=" + std::to_string(steps) + " --set data.path=\"" + kData +
         "\" --set train.out_dir=\"" + out + "\" " + extra;
}

// A run of 2 steps in its own folder, then reruns there (train.resume=auto, the default).
struct Rerun {
  TempDir dir{"giant-rerun"};
  std::string out = dir.path() + "/out";
  Rerun() {
    const std::string log = dir.path() + "/first.log";
    EXPECT_EQ(run_train(train_args(out, 2, ""), log), 0) << read_file(log);
  }
  fs::path step(int s) const { return fs::path(out) / "checkpoints" / checkpoint::step_folder_name(s); }
  std::pair<int, std::string> again(int steps, const std::string& extra, const std::string& name = "rerun") const {
    const std::string log = dir.path() + "/" + name + ".log";
    const int status = run_train(train_args(out, steps, extra), log);
    return {status, read_file(log)};
  }
  // The step records of metrics.jsonl.
  std::vector<nlohmann::json> steps() const {
    std::vector<nlohmann::json> records;
    std::ifstream in(out + "/metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto record = nlohmann::json::parse(line);
      if (record.contains("lr")) records.push_back(record);
    }
    return records;
  }
};

void flip_last_kilobyte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>(fs::file_size(file) - 1000);
  char c = 0;
  f.seekg(at);
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(Rerun, AutoShowsWhyEachCheckpointIsUnusable) {
  Rerun run;
  for (int s : {1, 2}) flip_last_kilobyte(run.step(s) / "rank_00000.safetensors");
  const auto [status, log] = run.again(3, "");
  EXPECT_EQ(status, 1) << log;
  for (int s : {1, 2}) {
    EXPECT_NE(log.find("checkpoint " + run.step(s).string() + " is unusable:\n"), std::string::npos) << log;
    EXPECT_NE(log.find((run.step(s) / "rank_00000.safetensors").string()), std::string::npos) << log;
  }
  EXPECT_NE(log.find("(its contents changed)"), std::string::npos) << log;
  EXPECT_NE(log.find("no older checkpoint is left"), std::string::npos) << log;
  EXPECT_NE(log.find("is usable"), std::string::npos) << log;
}

TEST(Rerun, AnotherRunsCheckpointIsBadInputNamingEachKey) {
  Rerun run;
  TempDir other("giant-rerun-data");
  const std::string text = other.file("other.txt", std::string(4000, 'a') + "\n");
  const auto [status, log] =
      run.again(3, "--set model.layers=3 --set data.val_fraction=0.3 --set data.path=\"" + text + "\"");
  EXPECT_EQ(status, 2) << log;
  EXPECT_NE(log.find(run.step(2).string() + " was saved by another run"), std::string::npos) << log;
  EXPECT_NE(log.find("model.layers: 2 in the checkpoint, 3 in this run"), std::string::npos) << log;
  EXPECT_NE(log.find("data.val_fraction: 0.2 in the checkpoint, 0.3 in this run"), std::string::npos) << log;
  EXPECT_NE(log.find("data.path: \"" + fs::weakly_canonical(kData).string() + "\" in the checkpoint, \"" +
                     fs::weakly_canonical(text).string() + "\" in this run"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("step 3/3"), std::string::npos) << log;
}

// Every rank reads the manifest and refuses alike: no rank waits on another.
TEST(Rerun, AnotherRunsCheckpointIsRefusedOnEveryRank) {
  Rerun run;
  const std::string dp2 = "--set parallel.dp=2 --set train.micro_batch=2 --set model.hidden=64 --set ccl.timeout=60s";
  const int status = test::run_launch(run.dir.path(), train_args(run.out, 3, dp2), 2, "launch.log");
  const std::string log = read_file(run.dir.path() + "/launch.log");
  EXPECT_EQ(status, 2) << log;
  for (const std::string rank : {"[rank 0] ", "[rank 1] "}) {
    EXPECT_NE(log.find(rank + "  model.hidden: 32 in the checkpoint, 64 in this run"), std::string::npos) << log;
  }
}

TEST(Rerun, ChangedTrainingKeysAreListedAndApply) {
  Rerun run;
  const auto [status, log] = run.again(4, "--set train.lr=1e-3 --set train.min_lr=1e-3");
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("changed since the checkpoint, applied from step 3 on: train.lr 0.003 -> 0.001, "
                     "train.min_lr 0.0001 -> 0.001, train.steps 2 -> 4"),
            std::string::npos)
      << log;
  const auto records = run.steps();
  ASSERT_EQ(records.size(), 4u) << read_file(run.out + "/metrics.jsonl");
  EXPECT_DOUBLE_EQ(records[0]["lr"].get<double>(), 3e-3);  // the first run's, at its peak
  for (size_t i : {2, 3}) EXPECT_EQ(records[i]["lr"].get<double>(), 1e-3) << "step " << i + 1;

  // A new weight decay and beta2 reach the optimizer: step 4 (after the
  // first resumed update) differs from the same resume without them.
  const double loss_4 = records[3]["loss"].get<double>();
  fs::remove_all(run.step(4));
  fs::remove_all(run.step(3));
  std::ofstream(fs::path(run.out) / "checkpoints" / "latest", std::ios::trunc) << "step_00000002\n";
  const auto [again_status, again_log] = run.again(
      4, "--set train.lr=1e-3 --set train.min_lr=1e-3 --set train.weight_decay=0.9 --set train.beta2=0.5", "decay");
  ASSERT_EQ(again_status, 0) << again_log;
  EXPECT_NE(again_log.find("train.beta2 0.95 -> 0.5"), std::string::npos) << again_log;
  EXPECT_NE(again_log.find("train.weight_decay 0.1 -> 0.9"), std::string::npos) << again_log;
  const auto decayed = run.steps();
  ASSERT_EQ(decayed.size(), 4u);
  EXPECT_EQ(decayed[2]["loss"].get<double>(), records[2]["loss"].get<double>());  // from the same weights
  EXPECT_NE(decayed[3]["loss"].get<double>(), loss_4);
}

TEST(Rerun, NothingLeftToTrainSaysWhatToChange) {
  Rerun run;
  const auto [same_status, same_log] = run.again(2, "", "same");
  EXPECT_EQ(same_status, 0) << same_log;
  EXPECT_NE(same_log.find("the checkpoint " + run.step(2).string() +
                          " is at train.steps = 2: nothing left to train (raise train.steps to train on"),
            std::string::npos)
      << same_log;
  // A new learning rate with no step left to apply it to is refused.
  const auto [status, log] = run.again(2, "--set train.lr=1e-3", "lr");
  EXPECT_EQ(status, 2) << log;
  EXPECT_NE(log.find("'train.steps': is 2 and the checkpoint " + run.step(2).string() +
                     " is at step 2, so nothing is left to train and the keys changed since (train.lr 0.003 -> 0.001) "
                     "would not apply: raise train.steps above 2"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace giant::train
