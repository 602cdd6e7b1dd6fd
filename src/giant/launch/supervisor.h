// Runs the ranks of one launch to the end: passes on their output line by
// line with a rank prefix, forwards the launcher's signals, and when a rank
// fails stops the others (SIGTERM, then SIGKILL after a grace period). Every
// rank runs in a process group of its own and every signal goes to the whole
// group, so the processes a rank starts end with it. The groups are made
// beforehand by a Lifeline, so that the ranks end also when the launcher is
// killed.
#pragma once

#include <sys/types.h>

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "giant/base/timer.h"
#include "giant/launch/rank_output.h"
#include "giant/launch/rank_process.h"

namespace giant::launch {

class Lifeline;
class SignalPipe;

class Supervisor {
 public:
  // Rank output goes to stdout_fd and stderr_fd; the launcher's own lines
  // ("giant launch: ...") to log. Rank i starts in lifeline.group(i); the
  // lifeline must outlive the Supervisor.
  Supervisor(int stdout_fd, int stderr_fd, double grace_seconds, Lifeline& lifeline, std::ostream& log);
  // Kills (SIGKILL) and reaps whatever still runs, e.g. after an exception.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the next rank (ranks are started in order). A rank that cannot
  // start counts as failed (exit status 127) and stops the others; returns
  // false then, and no further ranks should be started.
  bool start(const std::string& host_label, const SpawnRequest& request);

  // Waits for every rank, acting on signals as they come. Returns the launch's
  // exit status: 0 when every rank exited 0; else the first failed rank's
  // status (its exit code, or 128 + signal); else, when stopped by a signal,
  // 128 + that signal.
  int run(SignalPipe& signals);

  // The pid of each started rank, in rank order.
  std::vector<pid_t> pids() const;

  // After run(): how the first rank to fail ended ("rank 1 exited with code
  // 3"), empty when none failed; and the first SIGINT, SIGTERM or SIGHUP the
  // launcher got (0: none), also while it was stopping the ranks after a
  // failure: after one, nothing should start again.
  std::string failure() const;
  int stop_signal() const { return first_signal_; }

 private:
  struct Rank;

  void on_signal(int signo);
  void begin_stop();
  void signal_running(int signo);
  void read_output(Rank& rank, bool until_eof_or_empty);
  void reap();
  void report_failure(const Rank& rank);
  void close_streams(Rank& rank);
  int finish();
  void say(const std::string& line);

  int stdout_fd_;
  int stderr_fd_;
  double grace_seconds_;
  Lifeline& lifeline_;
  std::ostream& log_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  bool stopping_ = false;
  Deadline kill_at_ = Deadline::never();
  int first_failed_ = -1;     // rank
  int received_signal_ = 0;  // the first SIGINT/SIGTERM/SIGHUP before any rank failed
  int first_signal_ = 0;     // the first SIGINT/SIGTERM/SIGHUP at all
};

}  // namespace giant::launch
