// SIGINT and SIGTERM stop giant train cleanly: the step in flight finishes,
// a checkpoint is saved at it, the summary record is written, and the
// process exits 128 + the signal; the same command then resumes from that
// step. Under giant launch every rank stops after the same step. A second
// signal ends the process at once. Real processes: giant train (and giant
// launch) started from the test, signalled once they have logged steps.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "giant/checkpoint/checkpoint_dir.h"
#include "train/support/launch_support.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

using Clock = std::chrono::steady_clock;
using test::giant_binary;
using test::read_file;

const std::string kData = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

// Starts argv (argv[0] a path) with stdout and stderr in `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

std::vector<std::string> train_argv(const std::string& out, int64_t steps, const std::string& layout = "") {
  std::vector<std::string> argv{giant_binary(), "train"};
  for (const std::string& key : std::vector<std::string>{"model.layers=2", "model.hidden=64", "model.heads=2", "model.seq_len=32", "train.global_batch=8",
        "train.micro_batch=4", "train.threads=1", "train.eval_every=0", "train.eval_batches=1",
        "train.sample_tokens=0", "train.precision=\"fp32\"", "train.tensorboard=false", "ccl.timeout=\"20s\"",
        "train.steps=" + std::to_string(steps), "data.path=\"" + kData + "\"", "train.out_dir=\"" + out + "\""}) {
    argv.insert(argv.end(), {"--set", key});
  }
  if (!layout.empty()) argv.insert(argv.end(), {"--set", layout});
  return argv;
}

// Waits until metrics.jsonl in `out` has logged step `step`; false when the
// process ended first or two minutes passed.
bool wait_for_step(pid_t pid, const std::string& out, int step) {
  const auto start = Clock::now();
  const std::string mark = "\"step\":" + std::to_string(step) + ",";
  while (read_file(out + "/metrics.jsonl").find(mark) == std::string::npos) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) != 0 || Clock::now() - start > std::chrono::minutes(2)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// The summary record of metrics.jsonl (null when there is none).
nlohmann::json summary_of(const std::string& out) {
  const std::string text = read_file(out + "/metrics.jsonl");
  const size_t at = text.rfind("{\"summary\":true");
  if (at == std::string::npos) return nullptr;
  return nlohmann::json::parse(text.substr(at, text.find('\n', at) - at));
}

// The steps of the checkpoints saved in out/checkpoints (step_NNNNNNNN folders).
std::vector<int64_t> checkpoint_steps(const std::string& out) {
  std::vector<int64_t> steps;
  for (const auto& entry : std::filesystem::directory_iterator(out + "/checkpoints")) {
    if (const auto step = checkpoint::step_of_folder(entry.path().filename().string())) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

TEST(StopSignal, SigintFinishesTheStepSavesAndExits130ThenTheRunResumes) {
  const test::TempDir dir("giant-stop-signal");
  const std::string out = dir.path() + "/out", log = dir.path() + "/train.log";
  const pid_t pid = spawn(train_argv(out, 100000), log);
  ASSERT_TRUE(wait_for_step(pid, out, 2)) << read_file(log);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string text = read_file(log);
  ASSERT_EQ(exit_code(status), 130) << status << "\n" << text;
  const nlohmann::json summary = summary_of(out);
  ASSERT_FALSE(summary.is_null()) << read_file(out + "/metrics.jsonl");
  EXPECT_EQ(summary["stopped_by_signal"], SIGINT);
  const int64_t last = summary["last_step"];
  EXPECT_GE(last, 2);
  EXPECT_EQ(checkpoint_steps(out).back(), last) << "a checkpoint at the step the run stopped after";
  EXPECT_NE(text.find("giant train: stopped by SIGINT after step " + std::to_string(last) + " of 100000"),
            std::string::npos)
      << text;

  // The same command, now with an end in sight, resumes from there.
  std::vector<std::string> again = train_argv(out, last + 2);
  again.insert(again.end(), {"--set", "train.resume=\"auto\""});
  const pid_t resumed = spawn(again, dir.path() + "/resumed.log");
  ASSERT_EQ(waitpid(resumed, &status, 0), resumed);
  const std::string resumed_text = read_file(dir.path() + "/resumed.log");
  ASSERT_EQ(exit_code(status), 0) << resumed_text;
  EXPECT_NE(resumed_text.find("at step " + std::to_string(last)), std::string::npos) << resumed_text;
  EXPECT_EQ(summary_of(out)["last_step"], last + 2);
}

TEST(StopSignal, ASecondSignalEndsTheProcessAtOnce) {
  const test::TempDir dir("giant-stop-signal");
  const std::string out = dir.path() + "/out", log = dir.path() + "/train.log";
  // Long steps: both signals land within one.
  std::vector<std::string> argv = train_argv(out, 100000);
  argv.insert(argv.end(), {"--set", "model.hidden=512", "--set", "model.heads=8", "--set", "model.seq_len=256"});
  const pid_t pid = spawn(argv, log);
  ASSERT_TRUE(wait_for_step(pid, out, 1)) << read_file(log);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  // Apart: a signal sent while the same one is still pending merges with it.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status << "\n" << read_file(log);
  EXPECT_TRUE(summary_of(out).is_null()) << "no summary: it did not wait for the step";
}

// Under giant launch the launcher passes SIGTERM on; both ranks stop after
// the same step (one agreed decision), save one checkpoint and exit 143.
TEST(StopSignal, SigtermUnderLaunchStopsEveryRankAfterTheSameStep) {
  const test::TempDir dir("giant-stop-signal");
  const std::string out = dir.path() + "/out", log = dir.path() + "/launch.log";
  std::vector<std::string> argv{giant_binary(), "launch", "--nproc", "2", "--"};
  for (const std::string& a : train_argv(out, 100000, "parallel.dp=2")) argv.push_back(a);
  const pid_t pid = spawn(argv, log);
  ASSERT_TRUE(wait_for_step(pid, out, 3)) << read_file(log);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string text = read_file(log);
  ASSERT_EQ(exit_code(status), 143) << status << "\n" << text;
  for (const char* rank : {"rank 0", "rank 1"}) {
    EXPECT_NE(text.find(std::string("  ") + rank + " (local, pid "), std::string::npos) << text;
  }
  EXPECT_EQ(text.find("SIGKILL"), std::string::npos) << "every rank stopped by itself:\n" << text;
  const nlohmann::json summary = summary_of(out);
  ASSERT_FALSE(summary.is_null()) << text;
  EXPECT_EQ(summary["stopped_by_signal"], SIGTERM);
  EXPECT_EQ(checkpoint_steps(out).back(), summary["last_step"].get<int64_t>());
  EXPECT_NE(text.find("[rank 0] giant train: stopped by SIGTERM after step"), std::string::npos) << text;
}

}  // namespace
}  // namespace giant::train
