// giant launch running giant train as real processes: a data-parallel run
// completes (rank 0 alone writing its curves); pipeline layouts (with dp and
// tp, each schedule) give the single process's losses over 20 steps within
// the rounding model's bound (train/support/layout_bounds.h); and a rank killed mid-step (a data-parallel replica, or a
// pipeline stage) ends the launch, non-zero, naming the rank, within twice
// the ccl timeout, with no process left behind.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "train/support/event_file_reader.h"
#include "train/support/launch_support.h"
#include "train/support/layout_bounds.h"
#include "train/support/train_test_support.h"

namespace {

using Clock = std::chrono::steady_clock;

const std::string kGiant = std::string(GIANT_BINARY_DIR) + "/giant";
const std::string kData = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

using giant::train::test::losses_of;
using giant::train::test::read_file;
using giant::train::test::run_config_of;
using giant::train::test::start_launch;

struct TempDir : giant::train::test::TempDir {
  TempDir() : giant::train::test::TempDir("giant-launch-train") {}
};

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

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
  // train.precision = auto (the default): the ranks measure in turn and
  // agree on the slowest figures, and rank 0 prints the choice and why.
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

// A small pipelined job: its losses, one per step, from metrics.jsonl.
std::string pipeline_args(const std::string& out, const std::string& layout) {
  return "--set model.layers=6 --set model.hidden=32 --set model.heads=4 --set model.seq_len=16 "
         "--set train.global_batch=8 --set train.micro_batch=2 --set train.steps=20 --set train.lr=3e-3 "
         "--set train.warmup_steps=2 --set train.threads=1 --set train.eval_every=0 --set train.eval_batches=1 "
         "--set train.sample_tokens=0 --set train.precision=fp32 --set parallel.zero=0 --set ccl.timeout=20s "
         "--set data.val_fraction=0.2 --set data.path=\\\"" + kData + "\\\" --set train.out_dir=\\\"" + out +
         "\\\" " + layout;
}

TEST(LaunchTrain, PipelineProcessesReproduceTheSingleProcess) {
  TempDir dir;
  const std::string single = dir.path() + "/single";
  ASSERT_EQ(std::system((kGiant + " train " + pipeline_args(single, "") + " > " + dir.path() + "/single.log 2>&1")
                            .c_str()),
            0)
      << read_file(dir.path() + "/single.log");
  const std::vector<double> expected = losses_of(single + "/metrics.jsonl");
  ASSERT_EQ(expected.size(), 20u);
  struct Case {
    int processes;
    const char* layout;
  };
  for (Case c : {Case{4, "--set parallel.pp=4 --set parallel.schedule=interleaved --set parallel.virtual_stages=2"},
                 Case{8, "--set parallel.dp=2 --set parallel.pp=2 --set parallel.tp=2"},
                 Case{4, "--set parallel.pp=2 --set parallel.tp=2 --set parallel.schedule=gpipe"}}) {
    SCOPED_TRACE(c.layout);
    const std::string out = dir.path() + "/run" + std::to_string(c.processes);
    std::filesystem::remove_all(out);
    const pid_t launch = start_launch(dir.path(), pipeline_args(out, c.layout), c.processes);
    int status = 0;
    ASSERT_EQ(waitpid(launch, &status, 0), launch);
    const std::string log = read_file(dir.path() + "/launch.log");
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
    EXPECT_NE(log.find("stage 0 (pp rank 0): embedding"), std::string::npos) << log;
    const std::vector<double> losses = losses_of(out + "/metrics.jsonl");
    ASSERT_EQ(losses.size(), expected.size());
    const double bound = giant::train::test::layout_bounds(run_config_of(pipeline_args(out, c.layout))).loss;
    for (size_t step = 0; step < losses.size(); ++step) {
      EXPECT_LE(std::abs(losses[step] - expected[step]) / expected[step], bound) << "step " << step + 1;
    }
  }
}

// Starts a long run, kills rank 1 once rank 0 has logged three steps, and
// checks that the launch ends as it must.
void kill_rank_one_mid_run(const std::string& extra_args) {
  TempDir dir;
  const pid_t launch = start_launch(dir.path(), train_args(dir.path(), 100000) + extra_args);
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

TEST(LaunchTrain, KilledRankEndsTheRunNamingIt) { kill_rank_one_mid_run(""); }

// The last of two stages killed: the first waits on its gradients.
TEST(LaunchTrain, KilledPipelineStageEndsTheRunNamingIt) {
  kill_rank_one_mid_run(" --set parallel.dp=1 --set parallel.pp=2");
}

}  // namespace
