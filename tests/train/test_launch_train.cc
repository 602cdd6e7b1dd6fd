// giant launch running giant train as real processes: a data-parallel run
// completes (rank 0 alone writing its curves), and a rank killed mid-step
// ends the launch, non-zero, naming the rank, within twice the ccl timeout,
// with no process left behind.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "train/support/event_file_reader.h"
#include "train/support/train_test_support.h"

namespace {

using Clock = std::chrono::steady_clock;

const std::string kGiant = std::string(GIANT_BINARY_DIR) + "/giant";
const std::string kData = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

using giant::train::test::read_file;

struct TempDir : giant::train::test::TempDir {
  TempDir() : giant::train::test::TempDir("giant-launch-train") {}
};

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

// Starts `giant launch ...` with its output in dir/launch.log.
pid_t start_launch(const std::string& dir, const std::string& train_args) {
  const std::string command = kGiant + " launch --nproc 2 -- sh -c 'echo $$ > " + dir +
                              "/pid.$GIANT_RANK; exec " + kGiant + " train " + train_args + "' > " + dir +
                              "/launch.log 2>&1";
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

std::string train_args(const std::string& dir, int steps) {
  return "--set parallel.dp=2 --set train.micro_batch=4 --set train.global_batch=8 --set model.layers=2 "
         "--set model.hidden=64 --set train.threads=1 --set train.eval_every=0 --set train.eval_batches=1 "
         "--set train.sample_tokens=0 --set ccl.timeout=5s --set train.steps=" +
         std::to_string(steps) + " --set data.path=\\\"" + kData + "\\\" --set train.out_dir=\\\"" + dir +
         "/out\\\"";
}

TEST(LaunchTrain, DataParallelRunCompletes) {
  TempDir dir;
  const pid_t launch = start_launch(dir.path(), train_args(dir.path(), 3));
  int status = 0;
  ASSERT_EQ(waitpid(launch, &status, 0), launch);
  const std::string log = read_file(dir.path() + "/launch.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  EXPECT_NE(log.find("[rank 0] giant train: done: 3 steps"), std::string::npos) << log;
  // train.precision = auto (the default): each rank probes, rank 0 prints
  // the choice and why, and the ranks agreed (or the run would have stopped).
  EXPECT_NE(log.find("[rank 0] giant train: precision: "), std::string::npos) << log;
  EXPECT_NE(log.find("(auto: bf16 matrix products at "), std::string::npos) << log;
  EXPECT_NE(read_file(dir.path() + "/out/metrics.jsonl").find("\"summary\":true"), std::string::npos);
  // Only rank 0 writes the curves: one event file, each step once.
  const std::vector<std::string> events = giant::train::test::event_files(dir.path() + "/out/tensorboard");
  ASSERT_EQ(events.size(), 1u);
  int losses = 0;
  for (const auto& scalar : giant::train::test::decode(events[0])) losses += scalar.tag == "loss/train";
  EXPECT_EQ(losses, 3);
}

TEST(LaunchTrain, KilledRankEndsTheRunNamingIt) {
  TempDir dir;
  const pid_t launch = start_launch(dir.path(), train_args(dir.path(), 100000));
  // Wait until training runs (rank 0 has written steps), then kill rank 1.
  const std::string metrics = dir.path() + "/out/metrics.jsonl";
  const auto started = Clock::now();
  while (read_file(metrics).find("\"step\":3,") == std::string::npos) {
    int early = 0;
    ASSERT_EQ(waitpid(launch, &early, WNOHANG), 0) << "the launch ended early:\n"
                                                   << read_file(dir.path() + "/launch.log");
    ASSERT_LT(Clock::now() - started, std::chrono::seconds(120)) << read_file(dir.path() + "/launch.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t rank0 = std::stoi(read_file(dir.path() + "/pid.0"));
  const pid_t rank1 = std::stoi(read_file(dir.path() + "/pid.1"));
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  const auto killed = Clock::now();
  int status = 0;
  ASSERT_EQ(waitpid(launch, &status, 0), launch);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  const std::string log = read_file(dir.path() + "/launch.log");
  EXPECT_LT(seconds, 2 * 5.0) << "twice ccl.timeout";
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_NE(WEXITSTATUS(status), 0) << log;
  EXPECT_NE(log.find("rank 1 was killed by signal 9"), std::string::npos) << log;
  EXPECT_FALSE(alive(rank0));
  EXPECT_FALSE(alive(rank1));
  std::printf("launch ended %.3f s after rank 1 was killed\n", seconds);
}

}  // namespace
