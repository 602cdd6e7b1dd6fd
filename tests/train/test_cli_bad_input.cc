// giant's commands on what a new user gets wrong, as a process: each
// mistake is bad input (exit status 2, as every command's help says) naming
// what to change, before any work: a config that is not a file, a data.path
// that is not a dataset, a model no layout fits, a CHECKPOINT that is none.
// And what a run shows: --log-level warn hides the trainer's info lines, the
// start-up dump lists only the keys not at their default, and config.toml
// repeats the run byte for byte, whatever bytes its paths hold.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "giant/train/run_device.h"
#include "train/support/giant_process.h"

namespace giant::train::test {
namespace {

namespace fs = std::filesystem;

// A model and run small enough to train two steps in a moment.
const std::string kTinyRun =
    " --set model.layers=1 --set model.hidden=32 --set model.heads=2 --set model.seq_len=16"
    " --set train.global_batch=4 --set train.micro_batch=2 --set train.threads=1 --set train.steps=2"
    " --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0 --set train.tensorboard=false"
    " --set train.precision=fp32 --set train.resume=\"''\" --set data.val_fraction=0.5";

std::string text_file(const TempDir& dir, const std::string& name) {
  std::string text;
  while (text.size() < 400) text += "In the beginning was the word. ";
  return dir.file(name, text);
}

// `giant train DIRECTORY` read the directory as an empty TOML file and
// trained the defaults.
TEST(CliBadInput, AConfigThatIsNotAFileIsRefused) {
  TempDir dir;
  expect_bad_input("train " + dir.path() + kTinyRun + " --set train.out_dir=" + dir.path() + "/out",
                   "config file '" + dir.path() + "' is a directory");
  EXPECT_FALSE(fs::exists(dir.path() + "/out"));
  expect_bad_input("train /dev/null --print-config", "config file '/dev/null' is not a regular file");
}

// A text file given as a prefix (data.path = "notes.bin") failed at run
// time naming only notes.idx.
TEST(CliBadInput, ADataPathThatIsNoDatasetNamesTheKeyAndWhatAPrefixNeeds) {
  TempDir dir;
  const std::string notes = text_file(dir, "notes.bin");
  const Outcome r = giant("train" + kTinyRun + " --set data.path=" + notes + " --set train.out_dir=" + dir.path() +
                          "/out");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("'data.path': '" + notes + "' names the .bin/.idx prefix"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a prefix needs both " + dir.path() + "/notes.bin and " + dir.path() + "/notes.idx"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("giant data prepare"), std::string::npos) << r.err;
  expect_user_terms(r, "data.path=notes.bin");
}

// The refusal blamed train.memory_limit_gb, which nobody had set, in a
// sentence that ended at "would".
TEST(CliBadInput, AModelTooLargeForMemoryNamesTheModelKeyInAWholeSentence) {
  const Outcome r = giant("train --set model.seq_len=100000000 --set train.precision=fp32");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("giant train: 'model.seq_len': the planner predicts"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("make the model smaller (model.seq_len first, or model.hidden or model.layers) or run on "
                       "more ranks.\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("memory_limit_gb"), std::string::npos) << r.err;
}

// A folder that holds no checkpoint is the "checkpoint path" the help
// promises 2 for; it was a runtime failure (1).
TEST(CliBadInput, GenerateFromWhatIsNoCheckpointIsBadInput) {
  TempDir dir;
  expect_bad_input("generate " + dir.path(), "'CHECKPOINT': '" + dir.path() + "' is neither a checkpoint");
  const std::string file = text_file(dir, "notes.txt");
  expect_bad_input("generate " + file, "'CHECKPOINT': '" + file + "' is neither a checkpoint");
}

// train.resume naming a folder that holds no checkpoint failed at run time
// (1), though the help gives 2 for a bad config.
TEST(CliBadInput, ResumeFromWhatIsNoCheckpointIsBadInput) {
  TempDir dir;
  fs::create_directories(dir.path() + "/empty");
  const Outcome r = giant("train" + kTinyRun + " --set train.resume=" + dir.path() + "/empty --set data.path=" +
                          text_file(dir, "notes.txt") + " --set train.out_dir=" + dir.path() + "/out");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("'train.resume': '" + dir.path() + "/empty' is neither a checkpoint"), std::string::npos)
      << r.err;
}

// The fault tests' hook (train.fault, from the environment as the tests
// arm it) and the launcher's restart count refuse what they cannot use,
// before any work.
TEST(CliBadInput, AFaultToInjectARestartCountOrAHangTimeoutThatCannotBeUsedNamesTheKey) {
  TempDir dir;
  const std::string run = "train" + kTinyRun + " --set train.out_dir=" + dir.path() + "/out";
  expect_bad_input(run, "'train.fault': unknown phase 'backwards'", "GIANT_TRAIN_FAULT=backwards@3");
  expect_bad_input(run, "'train.fault': unknown action 'explode'", "GIANT_TRAIN_FAULT=optimizer@2,action=explode");
  expect_bad_input(run, "'train.fault': STEP must be a whole number of at least 1", "GIANT_TRAIN_FAULT=forward@0");
  expect_bad_input(run, "'train.fault': no '@STEP' after the phase", "GIANT_TRAIN_FAULT=forward");
  expect_bad_input(run, "'train.restart': must not be negative", "GIANT_TRAIN_RESTART=-1");
  expect_bad_input(run, "'train.hang_timeout': must be 0 (automatic) or at least 1 second", "GIANT_TRAIN_HANG_TIMEOUT=0.5");
  expect_bad_input(run, "'train.hang_timeout': must be 0 (automatic) or at least 1 second", "GIANT_TRAIN_HANG_TIMEOUT=-3");
  EXPECT_FALSE(fs::exists(dir.path() + "/out"));
}

// train.device: a form it does not know, or (on a libtorch without CUDA, as
// the CI's) a GPU, exits 2 naming the key before anything is written.
TEST(CliBadInput, ADeviceThatCannotBeUsedNamesTheKey) {
  TempDir dir;
  const std::string run = "train" + kTinyRun + " --set train.out_dir=" + dir.path() + "/out";
  expect_bad_input(run, "'train.device': must be auto, cpu, cuda or cuda:N, got 'gpu'", "GIANT_TRAIN_DEVICE=gpu");
  if (!giant::train::cuda_in_libtorch()) {
    expect_bad_input(run, "'train.device': is 'cuda', but this giant is built against a libtorch without CUDA",
                     "GIANT_TRAIN_DEVICE=cuda");
    expect_bad_input(run, "'train.device': is 'cuda:1', but this giant is built against a libtorch without CUDA",
                     "GIANT_TRAIN_DEVICE=cuda:1");
  } else {
    expect_bad_input(run, "'train.device': is 'cuda:4096', but this process sees", "GIANT_TRAIN_DEVICE=cuda:4096");
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/out"));
}

// Every command's help states its exit statuses, and input it cannot use
// (not only a mistyped flag) gets the status the help gives for bad input.
TEST(CliBadInput, EveryCommandExitsAsItsHelpSays) {
  TempDir dir;
  const std::string empty = dir.path() + "/empty", missing = dir.path() + "/missing.txt";
  fs::create_directories(empty);
  struct Case {
    std::string command, bad_input;
  };
  const std::vector<Case> cases = {
      {"train", empty},
      {"generate", empty},
      {"launch", "--nproc 0 -- true"},
      {"bench ccl", "--nproc 0"},
      {"bench pipeline", "--micro-batches 0"},
      {"plan", "--model gpt-13b --cluster " + missing},
      {"checkpoint info", empty},
      {"checkpoint verify", empty},
      {"checkpoint export", "--format hf-gpt2 " + empty + " " + dir.path() + "/hf"},
      {"checkpoint import", "--format hf-gpt2 " + empty + " " + dir.path() + "/imported"},
      {"data prepare", "--input " + missing + " --tokenizer byte --output " + dir.path() + "/prefix"},
      {"data train-tokenizer", "--vocab-size 300 --output " + dir.path() + "/bpe " + missing},
  };
  for (const Case& c : cases) {
    const Outcome help = giant(c.command + " --help");
    EXPECT_EQ(help.code, 0) << c.command << "\n" << help.err;
    const size_t status = help.out.find("Exit status: 0 ");
    EXPECT_NE(status, std::string::npos) << c.command << " --help states no exit status:\n" << help.out;
    EXPECT_TRUE(std::regex_search(help.out.substr(status), std::regex("2 (for )?bad")))
        << c.command << " --help:\n" << help.out;
    const Outcome bad = giant(c.command + " " + c.bad_input);
    EXPECT_EQ(bad.code, 2) << "giant " << c.command << " " << c.bad_input << "\n" << bad.out << bad.err;
    EXPECT_NE(bad.err.find("giant " + c.command + ": "), std::string::npos) << bad.err;
    expect_user_terms(bad, c.command);
  }
}

// The run's output folder and a two-step run of kTinyRun on `data`.
Outcome train_tiny(const TempDir& dir, const std::string& data, const std::string& extra = "") {
  return giant("train" + kTinyRun + " --set 'data.path=" + data + "' --set train.out_dir=" + dir.path() + "/out" +
               extra);
}

// A non-UTF-8 path in config.toml was written as another path (its bytes
// read as Latin-1, then UTF-8 encoded).
TEST(CliRun, ARunRepeatsFromItsOwnConfigWhateverBytesItsPathsHold) {
  TempDir dir;
  fs::create_directories(dir.path() + "/caf\xE9");  // é in Latin-1: not UTF-8
  const std::string data = text_file(dir, "caf\xE9/text.txt");
  const Outcome run = train_tiny(dir, data);
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  const Outcome again = giant("train " + dir.path() + "/out/config.toml --print-config");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("data.path = \"" + data + "\" (config)"), std::string::npos) << again.out;
}

// --log-level warn reaches the trainer: its start-up and progress lines are
// info, so a run with nothing wrong prints nothing.
TEST(CliRun, LogLevelWarnHidesTheTrainersInfoLines) {
  TempDir dir;
  const Outcome r = train_tiny(dir, text_file(dir, "text.txt"), " --log-level warn");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "") << "printed at --log-level warn:\n" << r.out;
  EXPECT_TRUE(fs::exists(dir.path() + "/out/metrics.jsonl"));
}

// The start-up dump lists the keys not at their default, with their
// sources, and says where all of them are.
TEST(CliRun, TheStartUpDumpListsOnlyKeysNotAtTheirDefault) {
  TempDir dir;
  const Outcome r = train_tiny(dir, text_file(dir, "text.txt"));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string header = "giant train: effective config, keys not at their default (value, source; all keys in " +
                             dir.path() + "/out/config.toml):\n";
  const size_t at = r.out.find(header);
  ASSERT_NE(at, std::string::npos) << r.out;
  std::istringstream lines(r.out.substr(at + header.size()));
  std::vector<std::string> dumped;
  for (std::string line; std::getline(lines, line) && line.rfind("  ", 0) == 0;) dumped.push_back(line);
  // kTinyRun's keys, data.path and train.out_dir, less those it sets to their default.
  EXPECT_GE(dumped.size(), 10u) << r.out;
  EXPECT_LE(dumped.size(), 17u) << r.out;
  for (const std::string& line : dumped) EXPECT_NE(line.find("(command line)"), std::string::npos) << line;
  EXPECT_NE(r.out.find("  train.steps = 2 (command line)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("model.vocab ="), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ccl."), std::string::npos) << r.out;
}

}  // namespace
}  // namespace giant::train::test
