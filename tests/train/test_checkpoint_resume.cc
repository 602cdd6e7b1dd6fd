// Checkpoints under giant launch: a run whose rank is killed (SIGKILL)
// after a checkpoint, launched again with train.resume=auto, logs the same
// losses and ends with the same parameters and optimizer state, bitwise,
// as a run never interrupted: one process, dp=2 with ZeRO 0 and 1, tp=2,
// pp=2 (1F1B), bf16 (dp=2, ZeRO 1), bf16 with dynamic loss scaling, and
// dp=4 over two hosts with int8 gradient compression (ZeRO 2). And a rank
// failed on purpose (train.fault: killed in backward, killed while writing
// a checkpoint, stopped in the optimizer step, hung; dp2, tp2, pp2, and dp2
// x pp2 over two emulated hosts) under `giant launch --max-restarts 1` ends
// the same way with no one resuming it by hand, and with local copies every
// step (checkpoint.local_every) from the step before the fault.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <torch/torch.h>

#include "giant/checkpoint/loader.h"
#include "train/support/checkpoint_compare.h"
#include "train/support/launch_support.h"

namespace {

namespace fs = std::filesystem;
using giant::checkpoint::CheckpointLoader;
using giant::train::test::losses_of;
using giant::train::test::read_file;
using giant::train::test::run_launch;
using giant::train::test::start_launch;
using giant::train::test::TempDir;
using giant::train::test::expect_same_state;

using giant::train::test::small_checkpointed_run;

std::string run_args(const std::string& out, const std::string& layout) { return small_checkpointed_run(out, layout); }

// Starts the run, SIGKILLs its last rank once the step-4 checkpoint is
// committed, and waits for the launch to end. When the run was quicker than
// the kill, the later checkpoint is removed as if it had never been made.
void run_and_kill_after_first_checkpoint(const std::string& dir, const std::string& args, int processes) {
  const fs::path checkpoints = fs::path(dir) / "out" / "checkpoints";
  const pid_t launch = start_launch(dir, args, processes, "killed.log");
  const auto started = std::chrono::steady_clock::now();
  int status = 0;
  bool ended = false;
  while (!fs::exists(checkpoints / "step_00000004" / "manifest.json")) {
    ASSERT_EQ(waitpid(launch, &status, WNOHANG), 0) << read_file(dir + "/killed.log");
    ASSERT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(300)) << read_file(dir + "/killed.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const pid_t victim = std::stoi(read_file(dir + "/pid." + std::to_string(processes - 1)));
  kill(victim, SIGKILL);
  ASSERT_EQ(waitpid(launch, &status, 0), launch);
  ended = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (ended) {  // too late: the run had finished
    fs::remove_all(checkpoints / "step_00000008");
    std::ofstream(checkpoints / "latest", std::ios::trunc) << "step_00000004\n";
  } else {
    EXPECT_NE(read_file(dir + "/killed.log").find("was killed by signal 9"), std::string::npos)
        << read_file(dir + "/killed.log");
  }
}

struct Case {
  const char* name;
  int processes;
  const char* layout;
};

class Resume : public ::testing::TestWithParam<Case> {};

TEST_P(Resume, AfterAKilledRankIsBitIdentical) {
  const Case& c = GetParam();
  TempDir reference_dir("giant-resume-ref"), dir("giant-resume");
  const std::string reference_out = reference_dir.path() + "/out";
  ASSERT_EQ(run_launch(reference_dir.path(), run_args(reference_out, c.layout), c.processes), 0)
      << read_file(reference_dir.path() + "/launch.log");
  const std::vector<double> expected = losses_of(reference_out + "/metrics.jsonl");
  ASSERT_EQ(expected.size(), 8u);

  const std::string out = dir.path() + "/out";
  run_and_kill_after_first_checkpoint(dir.path(), run_args(out, c.layout), c.processes);
  ASSERT_EQ(run_launch(dir.path(), run_args(out, c.layout + std::string(" --set train.resume=\\\"auto\\\"")),
                       c.processes, "resumed.log"),
            0)
      << read_file(dir.path() + "/resumed.log");
  const std::string log = read_file(dir.path() + "/resumed.log");
  EXPECT_NE(log.find("resuming from " + out + "/checkpoints/step_00000004 at step 4"), std::string::npos) << log;
  if (std::string(c.layout).find("grad_wire") != std::string::npos) {  // the residuals are what makes it bitwise
    EXPECT_TRUE(CheckpointLoader(out + "/checkpoints/step_00000004").has("grad_wire/3"));
    EXPECT_EQ(log.find("error feedback starts at zero"), std::string::npos) << log;
  }

  const std::vector<double> losses = losses_of(out + "/metrics.jsonl");
  ASSERT_EQ(losses.size(), expected.size()) << read_file(out + "/metrics.jsonl");
  for (size_t step = 0; step < losses.size(); ++step) EXPECT_EQ(losses[step], expected[step]) << "step " << step + 1;
  expect_same_state(reference_out + "/checkpoints/step_00000008", out + "/checkpoints/step_00000008");
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Resume,
    ::testing::Values(Case{"single", 1, ""}, Case{"dp2_zero0", 2, "--set parallel.dp=2 --set parallel.zero=0"},
                      Case{"dp2_zero1", 2, "--set parallel.dp=2 --set parallel.zero=1"},
                      Case{"tp2", 2, "--set parallel.tp=2"},
                      Case{"pp2_1f1b", 2, "--set parallel.pp=2 --set parallel.schedule=1f1b"},
                      Case{"bf16_dp2_zero1", 2, "--set parallel.dp=2 --set train.precision=bf16"},
                      // Two hosts of two ranks (host ids h0, h1): the gradients cross
                      // compressed, and each rank's error feedback is saved and restored.
                      Case{"dp4_int8_two_hosts", 4,
                           "--set parallel.dp=4 --set parallel.zero=2 --set parallel.grad_wire=\\\"int8\\\" "
                           "--set ccl.host_id=\\\"h$((GIANT_RANK/2))\\\""},
                      // The low-rank wire: each rank's residuals and the shared factors.
                      Case{"dp4_powersgd_two_hosts", 4,
                           "--set parallel.dp=4 --set parallel.zero=1 --set parallel.grad_wire=\\\"powersgd:2\\\" "
                           "--set ccl.host_id=\\\"h$((GIANT_RANK/2))\\\""},
                      // fp16 has no CPU kernels in this libtorch (the run is refused): the
                      // loss scaler's state is checked under bf16 with dynamic scaling.
                      Case{"bf16_loss_scaling", 1,
                           "--set train.precision=bf16 --set train.loss_scaling=dynamic --set train.loss_scale_window=3"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// A fault injected on purpose (train.fault) under `giant launch
// --max-restarts 1`: the launcher stops every rank, starts them again with
// train.resume=auto, and the run ends as one never interrupted, bitwise.
struct FaultCase {
  const char* name;
  const char* layout;
  const char* fault;
  const char* cause;      // how the launcher names the failure
  int resumed_from;       // the step of the checkpoint the restart resumes from
  int redone;             // the steps the failed attempt logged past it
  const char* flags = "";  // more for the faulty run
  const char* report = "";  // a line the failure writes besides the fault's own
  int processes = 2;
  const char* launch = "";  // giant launch's flags for both runs (the emulated hosts)
  bool local = false;  // the faulty run keeps a local copy every step (checkpoint.local_every=1)
};

class RestartAfterFault : public ::testing::TestWithParam<FaultCase> {};

TEST_P(RestartAfterFault, EndsBitIdenticalToARunNeverInterrupted) {
  const FaultCase& c = GetParam();
  TempDir reference_dir("giant-fault-ref"), dir("giant-fault");
  const std::string reference_out = reference_dir.path() + "/out", out = dir.path() + "/out";
  ASSERT_EQ(run_launch(reference_dir.path(), run_args(reference_out, c.layout), c.processes, "launch.log", c.launch),
            0)
      << read_file(reference_dir.path() + "/launch.log");
  const std::string local = dir.path() + "/local";
  const std::string faulty =
      run_args(out, c.layout) + " --set ccl.timeout=5s --set train.fault=\\\"" + c.fault + "\\\" " + c.flags +
      (c.local ? " --set checkpoint.local_every=1 --set checkpoint.local_dir=\\\"" + local + "\\\"" : "");
  ASSERT_EQ(run_launch(dir.path(), faulty, c.processes, "launch.log",
                       std::string(c.launch) + " --max-restarts 1 --restart-backoff 0"),
            0)
      << read_file(dir.path() + "/launch.log");
  const std::string log = read_file(dir.path() + "/launch.log");
  EXPECT_NE(log.find("giant train: train.fault: "), std::string::npos) << log;
  EXPECT_NE(log.find(c.report), std::string::npos) << log;
  EXPECT_NE(log.find(std::string("giant launch: restart 1 of 1 after ") + c.cause), std::string::npos) << log;
  const std::string resumed = std::to_string(c.resumed_from);
  const std::string from = c.local ? local : out + "/checkpoints";
  EXPECT_NE(log.find("resuming from " + from + "/step_0000000" + resumed + " at step " + resumed), std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(local)) << "the finished run left its local copies";
  EXPECT_EQ(losses_of(out + "/metrics.jsonl"), losses_of(reference_out + "/metrics.jsonl"));
  const std::string restart_record = "{\"step\":" + resumed + ",\"restart\":1,\"steps_redone\":" +
                                     std::to_string(c.redone) + ",\"seconds_redone\":";
  EXPECT_NE(read_file(out + "/metrics.jsonl").find(restart_record), std::string::npos)
      << restart_record << " in\n" << read_file(out + "/metrics.jsonl");
  expect_same_state(reference_out + "/checkpoints/step_00000008", out + "/checkpoints/step_00000008");
}

INSTANTIATE_TEST_SUITE_P(
    Faults, RestartAfterFault,
    ::testing::Values(
        FaultCase{"dp2_killed_in_backward", "--set parallel.dp=2", "backward@6,rank=1",
                  "rank 1 was killed by signal 9", 4, 1},
        // Killed while writing the step-8 checkpoint: the run goes on from step 4's.
        FaultCase{"dp2_killed_writing_a_checkpoint", "--set parallel.dp=2", "checkpoint@8,rank=1",
                  "rank 1 was killed by signal 9", 4, 4},
        // A stage stopped in its optimizer step: the other times out naming it.
        FaultCase{"pp2_stopped_in_the_optimizer", "--set parallel.pp=2 --set parallel.schedule=1f1b",
                  "optimizer@7,rank=1,action=stop", "rank 0 exited with code", 4, 2},
        // A rank whose training thread never returns while its process lives
        // (its engine answers the peers): the hang watchdog of one rank or
        // the other reports, well inside ccl.timeout, and exits.
        FaultCase{"dp2_hung_in_forward", "--set parallel.dp=2", "forward@6,rank=1,action=hang", "rank ", 4, 1,
                  "--set train.hang_timeout=3", "made no progress for "},
        FaultCase{"tp2_killed_in_forward", "--set parallel.tp=2", "forward@6,rank=1", "rank 1 was killed by signal 9",
                  4, 1},
        // dp2 x pp2 over two emulated hosts (giant launch --emulate, root): a
        // rank of the second host killed, and one hung, in backward.
        FaultCase{"dp2xpp2_two_hosts_killed_in_backward", "--set parallel.dp=2 --set parallel.pp=2",
                  "backward@6,rank=2", "rank 2 was killed by signal 9", 4, 1, "", "", 4, "--emulate 2x2"},
        FaultCase{"dp2xpp2_two_hosts_hung_in_backward", "--set parallel.dp=2 --set parallel.pp=2",
                  "backward@6,rank=3,action=hang", "rank ", 4, 1, "--set train.hang_timeout=3",
                  "made no progress for ", 4, "--emulate 2x2"},
        // The second host's link down for 8 s (ccl.timeout is 5 s) as rank 2
        // begins its optimizer step: the ranks time out, and the restart
        // finds the link back.
        FaultCase{"dp2xpp2_two_hosts_link_down_in_the_optimizer", "--set parallel.dp=2 --set parallel.pp=2",
                  "optimizer@6,rank=2,action=link_down,for=8", "rank ", 4, 1, "", "its host's link down", 4,
                  "--emulate 2x2"},
        // With a local copy every step (checkpoint.local_every), the
        // restart resumes from the step before the fault: nothing redone.
        FaultCase{"pp2_stopped_in_the_optimizer_local_copies", "--set parallel.pp=2 --set parallel.schedule=1f1b",
                  "optimizer@7,rank=1,action=stop", "rank 0 exited with code", 6, 0, "", "", 2, "", true},
        FaultCase{"dp2xpp2_two_hosts_killed_in_backward_local_copies", "--set parallel.dp=2 --set parallel.pp=2",
                  "backward@6,rank=2", "rank 2 was killed by signal 9", 5, 0, "", "", 4, "--emulate 2x2", true}),
    [](const ::testing::TestParamInfo<FaultCase>& info) { return std::string(info.param.name); });

}  // namespace
