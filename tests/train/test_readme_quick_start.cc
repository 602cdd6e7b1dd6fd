// README's quick start, top to bottom, as a new user runs it on a fresh
// clone. The commands are read from README.md's "Quick start: training"
// block, so the test follows the README as it changes. They run in a fresh
// folder holding only build/bin/giant and examples/ (the clone's), each
// shortened by GIANT_<KEY> environment overrides (2 steps of a narrow
// model, no precision probe); the keys a command sets itself still win.
// Every command must exit 0, and each one that trains must train its steps
// (not find its train.out_dir already holding a finished run, another
// model's or its own).
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "train/support/launch_support.h"

namespace {

namespace fs = std::filesystem;
using giant::train::test::giant_binary;
using giant::train::test::read_file;
using giant::train::test::TempDir;

// The commands of the first ```sh block after `heading`: continuation lines
// joined, blank lines and comments left out.
std::vector<std::string> commands_of(const std::string& markdown, const std::string& heading) {
  std::istringstream lines(markdown);
  std::vector<std::string> commands;
  bool under_heading = false, in_block = false;
  std::string pending;
  for (std::string line; std::getline(lines, line);) {
    if (!in_block) {
      if (line == heading) under_heading = true;
      in_block = under_heading && line == "```sh";
      continue;
    }
    if (line == "```") break;
    if (pending.empty() && (line.empty() || line[0] == '#')) continue;
    const bool continued = !line.empty() && line.back() == '\\';
    pending += continued ? line.substr(0, line.size() - 1) : line;
    if (!continued) {
      commands.push_back(pending);
      pending.clear();
    }
  }
  return commands;
}

// Short runs, as a test can afford: every command's steps, width, sample
// and threads (two threads per rank crawl on a loaded machine).
const char* const kShortRun[][2] = {
    {"GIANT_TRAIN_STEPS", "2"},        {"GIANT_MODEL_HIDDEN", "32"},       {"GIANT_MODEL_SEQ_LEN", "32"},
    {"GIANT_TRAIN_EVAL_EVERY", "0"},   {"GIANT_TRAIN_EVAL_BATCHES", "1"},  {"GIANT_TRAIN_SAMPLE_TOKENS", "8"},
    {"GIANT_TRAIN_PRECISION", "fp32"}, {"GIANT_TRAIN_THREADS", "1"},       {"GIANT_CCL_TIMEOUT", "120s"}};

class QuickStart : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [name, value] : kShortRun) setenv(name, value, 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : kShortRun) unsetenv(name);
  }
};

TEST(QuickStartBlock, IsFoundAndJoinsContinuedLines) {
  const std::string text = "## Other\n```sh\nnot this\n```\n## Quick start: training\n\n```sh\na   # note\n\n# comment\n"
                           "b \\\n    c\n```\nd\n";
  EXPECT_EQ(commands_of(text, "## Quick start: training"), (std::vector<std::string>{"a   # note", "b     c"}));
}

TEST_F(QuickStart, RunsTopToBottomOnAFreshClone) {
  const std::vector<std::string> commands =
      commands_of(read_file(std::string(GIANT_SOURCE_DIR) + "/README.md"), "## Quick start: training");
  ASSERT_GE(commands.size(), 5u) << "README.md has no quick-start block";
  // The build is this test's own; the rest run the giant it built.
  ASSERT_EQ(commands.front(), "scripts/build");
  TempDir clone("giant-quick-start");
  fs::create_directories(clone.path() + "/build/bin");
  fs::create_symlink(giant_binary(), clone.path() + "/build/bin/giant");
  fs::create_directory_symlink(std::string(GIANT_SOURCE_DIR) + "/examples", clone.path() + "/examples");

  for (size_t i = 1; i < commands.size(); ++i) {
    const std::string& command = commands[i];
    ASSERT_EQ(command.rfind("build/bin/giant ", 0), 0u) << "not a giant command: " << command;
    const std::string log = clone.path() + "/command_" + std::to_string(i) + ".log";
    // On a line of its own: a trailing comment must not swallow the redirection.
    const std::string shell = "cd " + clone.path() + " && (" + command + "\n) > " + log + " 2>&1 < /dev/null";
    const int status = std::system(shell.c_str());
    const std::string output = read_file(log);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command << "\n" << output;
    if (command.find("--print-config") != std::string::npos) continue;
    EXPECT_NE(output.find("giant train: done: 2 steps"), std::string::npos) << command << "\n" << output;
    EXPECT_EQ(output.find("nothing left to train"), std::string::npos) << command << "\n" << output;
  }
}

}  // namespace
