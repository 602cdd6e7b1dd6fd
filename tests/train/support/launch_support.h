// Running `giant train ...` and `giant launch ... -- giant train ...` as
// real processes from a test, and reading the losses a run logged.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "train/support/train_test_support.h"

namespace giant::train::test {

// `giant train` arguments for a small run of 8 steps at a constant learning
// rate, checkpointed every 4 steps, its outputs in `out`, then `more`.
inline std::string small_checkpointed_run(const std::string& out, const std::string& more = "") {
  const std::string data = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";
  return "--set model.layers=4 --set model.hidden=32 --set model.heads=4 --set model.seq_len=16 "
         "--set train.global_batch=8 --set train.micro_batch=2 --set train.steps=8 --set train.lr=3e-3 "
         "--set train.min_lr=3e-3 --set train.warmup_steps=0 --set train.threads=1 --set train.eval_every=0 "
         "--set train.eval_batches=1 --set train.sample_tokens=0 --set train.precision=fp32 --set ccl.timeout=20s "
         "--set checkpoint.every=4 --set data.val_fraction=0.2 --set data.path=\\\"" + data +
         "\\\" --set train.out_dir=\\\"" + out + "\\\" " + more;
}

inline const std::string& giant_binary() {
  static const std::string path = std::string(GIANT_BINARY_DIR) + "/giant";
  return path;
}

// Starts `giant launch --nproc N [LAUNCH_FLAGS] -- giant train ARGS` with its
// output in dir/launch.log; each rank writes its pid to dir/pid.<rank>.
inline pid_t start_launch(const std::string& dir, const std::string& train_args, int processes = 2,
                          const std::string& log = "launch.log", const std::string& launch_flags = "") {
  const std::string& giant = giant_binary();
  const std::string command = giant + " launch --nproc " + std::to_string(processes) + " " + launch_flags +
                              " -- sh -c 'echo $$ > " + dir +
                              "/pid.$GIANT_RANK; exec " + giant + " train " + train_args + "' > " + dir + "/" + log +
                              " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Runs it to the end: the exit status (-1 when it did not exit normally).
inline int run_launch(const std::string& dir, const std::string& train_args, int processes,
                      const std::string& log = "launch.log", const std::string& launch_flags = "") {
  const pid_t pid = start_launch(dir, train_args, processes, log, launch_flags);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// `PREFIX giant train ARGS` in one process through the shell: its exit
// status (-1 when it did not exit normally), its output in `log`.
inline int run_train(const std::string& args, const std::string& log, const std::string& prefix = "") {
  const std::string command = prefix + giant_binary() + " train " + args + " > " + log + " 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The run configuration that `--set key=value ...` train arguments give (the
// quotes in them escaped for the shell, as these tests write them), for the
// bounds a test derives from it; keys that are not the run's (ccl.*) are
// left out.
inline RunConfig run_config_of(const std::string& train_args) {
  Tunables keys = keys_with({});
  std::istringstream words(train_args);
  for (std::string word; words >> word;) {
    std::string unescaped;
    for (char ch : word) {
      if (ch != '\\') unescaped += ch;
    }
    if (word != "--set" && keys.has(unescaped.substr(0, unescaped.find('=')))) apply_override(keys, unescaped);
  }
  return run_config_from(keys);
}

// The training losses of metrics.jsonl, one per step, in order.
inline std::vector<double> losses_of(const std::string& metrics) {
  std::vector<double> losses;
  const std::string text = read_file(metrics);
  for (size_t at = text.find("\"loss\":"); at != std::string::npos; at = text.find("\"loss\":", at + 1)) {
    losses.push_back(std::stod(text.substr(at + 7)));
  }
  return losses;
}

}  // namespace giant::train::test
