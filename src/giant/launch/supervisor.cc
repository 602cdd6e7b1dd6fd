#include "giant/launch/supervisor.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ostream>
#include <sstream>

#include "giant/base/error.h"
#include "giant/base/units.h"
#include "giant/launch/lifeline.h"
#include "giant/launch/signal_pipe.h"

namespace giant::launch {
namespace {

// After the last rank has ended, how long to wait for its output pipes to
// close: a process that left the rank's group (setsid) may hold them forever.
constexpr double kDrainSeconds = 1.0;
// Reads per stream per wakeup, so one chatty rank cannot starve the others.
constexpr int kReadsPerWakeup = 4;
// Bound on reading an ended rank's pipes at once: a process that escaped its
// group could otherwise keep the loop here.
constexpr int kReadsAtEnd = 1024;
constexpr size_t kReadBytes = 64 * 1024;

// "SIGTERM, then SIGKILL".
std::string sent_signals(const std::vector<int>& signals) {
  std::string text;
  for (int signo : signals) text += (text.empty() ? "" : ", then ") + signal_name(signo);
  return text;
}

}  // namespace

struct Supervisor::Rank {
  int index = 0;
  std::string host_label;
  pid_t pid = -1;
  pid_t group = -1;  // its process group, made by the Lifeline
  bool running = false;
  bool start_failed = false;
  std::string start_error;
  int status = 0;
  std::vector<int> signals_sent;  // by the launcher, each once, in order
  UniqueFd out;
  UniqueFd err;
  std::unique_ptr<LinePrefixer> out_lines;
  std::unique_ptr<LinePrefixer> err_lines;

  std::string how_it_ended() const {
    if (start_failed) return "could not be started: " + start_error;
    return describe_wait_status(status);
  }
  bool failed() const { return start_failed || !succeeded(status); }
  int exit_status() const { return start_failed ? 127 : exit_code_of(status); }
};

Supervisor::Supervisor(int stdout_fd, int stderr_fd, double grace_seconds, Lifeline& lifeline, std::ostream& log)
    : stdout_fd_(stdout_fd), stderr_fd_(stderr_fd), grace_seconds_(grace_seconds), lifeline_(lifeline), log_(log) {}

Supervisor::~Supervisor() {
  for (auto& rank : ranks_) {
    if (!rank->running) continue;
    ::kill(-rank->group, SIGKILL);
    while (::waitpid(rank->pid, &rank->status, 0) < 0 && errno == EINTR) {
    }
    rank->running = false;
  }
}

void Supervisor::say(const std::string& line) {
  log_ << "giant launch: " + line + "\n" << std::flush;  // one write for the line
}

bool Supervisor::start(const std::string& host_label, const SpawnRequest& request) {
  auto rank = std::make_unique<Rank>();
  rank->index = static_cast<int>(ranks_.size());
  rank->host_label = host_label;
  try {
    SpawnRequest in_group = request;
    in_group.process_group = lifeline_.group(rank->index);
    SpawnedRank spawned = spawn_rank(in_group);
    rank->pid = spawned.pid;
    rank->group = in_group.process_group;
    rank->running = true;
    rank->out = std::move(spawned.stdout_fd);
    rank->err = std::move(spawned.stderr_fd);
    std::string prefix = LinePrefixer::rank_prefix(rank->index);
    int out_fd = stdout_fd_;
    int err_fd = stderr_fd_;
    rank->out_lines = std::make_unique<LinePrefixer>(prefix, [out_fd](const std::string& l) { write_fully(out_fd, l); });
    rank->err_lines = std::make_unique<LinePrefixer>(prefix, [err_fd](const std::string& l) { write_fully(err_fd, l); });
    ranks_.push_back(std::move(rank));
    return true;
  } catch (const Error& e) {
    rank->start_failed = true;
    rank->start_error = e.what();
    ranks_.push_back(std::move(rank));
    if (first_failed_ < 0) {
      first_failed_ = ranks_.back()->index;
      report_failure(*ranks_.back());
    }
    return false;
  }
}

std::vector<pid_t> Supervisor::pids() const {
  std::vector<pid_t> pids;
  for (const auto& rank : ranks_) pids.push_back(rank->pid);
  return pids;
}

void Supervisor::signal_running(int signo) {
  for (auto& rank : ranks_) {
    if (!rank->running) continue;
    ::kill(-rank->group, signo);  // the whole group: the rank and what it started
    auto& sent = rank->signals_sent;
    if (std::find(sent.begin(), sent.end(), signo) == sent.end()) sent.push_back(signo);
  }
}

void Supervisor::begin_stop() {
  if (stopping_) return;
  stopping_ = true;
  signal_running(SIGTERM);
  // A stopped rank (SIGSTOP, a debugger's) takes SIGTERM only once it runs:
  // woken, it ends now instead of after the grace.
  for (auto& rank : ranks_) {
    if (rank->running) ::kill(-rank->group, SIGCONT);
  }
  kill_at_ = Deadline::after_seconds(grace_seconds_);
}

void Supervisor::on_signal(int signo) {
  if (signo == SIGCHLD) return;  // only a wakeup; reap() looks at every rank
  if (first_signal_ == 0) first_signal_ = signo;
  if (stopping_) {
    // A second Ctrl-C, or one while the ranks are being stopped: no more waiting.
    say("got " + signal_name(signo) + " while stopping the ranks; killing them (SIGKILL)");
    signal_running(SIGKILL);
    kill_at_ = Deadline::never();
    if (received_signal_ == 0 && first_failed_ < 0) received_signal_ = signo;
    return;
  }
  received_signal_ = signo;
  // The ranks were asked, not failed: they stop by themselves (giant train
  // finishes its step and saves a checkpoint, which may take longer than
  // any grace); a second signal is how the user says not to wait.
  say("got " + signal_name(signo) + "; passing it to the ranks and waiting for them (a second signal kills them)");
  stopping_ = true;
  signal_running(signo);
}

void Supervisor::close_streams(Rank& rank) {
  if (rank.out.valid()) rank.out_lines->finish();
  if (rank.err.valid()) rank.err_lines->finish();
  rank.out.reset();
  rank.err.reset();
}

// Reads what the rank's pipes hold. until_eof_or_empty: read until nothing
// is left (before reporting how a rank ended, so its last words come first);
// else a few reads per stream, for fairness.
void Supervisor::read_output(Rank& rank, bool until_eof_or_empty) {
  char buffer[kReadBytes];
  for (int stream = 0; stream < 2; ++stream) {
    UniqueFd& fd = stream == 0 ? rank.out : rank.err;
    LinePrefixer& lines = stream == 0 ? *rank.out_lines : *rank.err_lines;
    const int max_reads = until_eof_or_empty ? kReadsAtEnd : kReadsPerWakeup;
    for (int reads = 0; fd.valid() && reads < max_reads; ++reads) {
      ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
      if (n > 0) {
        lines.feed(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      lines.finish();  // end of stream (or a broken pipe): flush a partial last line
      fd.reset();
    }
  }
}

void Supervisor::reap() {
  std::vector<Rank*> ended;
  for (auto& rank : ranks_) {
    if (!rank->running) continue;
    pid_t pid = ::waitpid(rank->pid, &rank->status, WNOHANG);
    if (pid == 0 || (pid < 0 && errno == EINTR)) continue;
    GIANT_CHECK(pid == rank->pid, "waitpid on rank ", rank->index, " (pid ", rank->pid, ") to succeed, got errno ",
                errno);
    rank->running = false;
    // What it started ends with it. The group's anchor (see lifeline.h) ends
    // too, and its id stays taken until the launch ends.
    ::kill(-rank->group, SIGKILL);
    read_output(*rank, true);
    ended.push_back(rank.get());
  }
  if (first_failed_ >= 0 || stopping_) return;
  // Ranks found ended in one sweep are ordered by cause, not by pid: a rank
  // killed by a signal is more likely the cause than one that exited with an
  // error after losing a peer.
  Rank* first = nullptr;
  for (Rank* rank : ended) {
    if (!rank->failed()) continue;
    bool by_signal = WIFSIGNALED(rank->status);
    if (first == nullptr || (by_signal && !WIFSIGNALED(first->status))) first = rank;
  }
  if (first == nullptr) return;
  first_failed_ = first->index;
  report_failure(*first);
  begin_stop();
}

void Supervisor::report_failure(const Rank& rank) {
  bool others = false;
  for (const auto& other : ranks_) others = others || other->running;
  say("rank " + std::to_string(rank.index) + " " + rank.how_it_ended() +
      (others ? "; stopping the other ranks" : ""));
}

int Supervisor::run(SignalPipe& signals) {
  if (first_failed_ >= 0) begin_stop();  // a rank could not start
  Deadline drain_until = Deadline::never();
  while (true) {
    bool any_running = false;
    bool any_open = false;
    for (const auto& rank : ranks_) {
      any_running = any_running || rank->running;
      any_open = any_open || rank->out.valid() || rank->err.valid();
    }
    if (!any_running) {
      if (!any_open) break;
      if (drain_until.is_never()) drain_until = Deadline::after_seconds(kDrainSeconds);
      if (drain_until.expired()) break;
    }

    std::vector<pollfd> fds{{signals.read_fd(), POLLIN, 0}};
    for (const auto& rank : ranks_) {
      if (rank->out.valid()) fds.push_back({rank->out.get(), POLLIN, 0});
      if (rank->err.valid()) fds.push_back({rank->err.get(), POLLIN, 0});
    }
    // SIGCHLD wakes the poll; the cap is a safety net, not the mechanism.
    int timeout_ms = kill_at_.earlier(drain_until).remaining_ms(1000);
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      throw Error(std::string("poll failed: ") + ::strerror(errno));
    }

    for (int signo : signals.take()) on_signal(signo);
    for (auto& rank : ranks_) read_output(*rank, false);
    reap();
    if (kill_at_.expired()) {
      std::string late;
      for (const auto& rank : ranks_) {
        if (rank->running) late += (late.empty() ? "" : ", ") + std::to_string(rank->index);
      }
      if (!late.empty()) {
        say("rank(s) " + late + " still running " + format_seconds(grace_seconds_) +
            " after being asked to stop; killing them (SIGKILL)");
        signal_running(SIGKILL);
      }
      kill_at_ = Deadline::never();
    }
  }
  for (auto& rank : ranks_) close_streams(*rank);
  return finish();
}

std::string Supervisor::failure() const {
  if (first_failed_ < 0) return "";
  return "rank " + std::to_string(first_failed_) + " " + ranks_[first_failed_]->how_it_ended();
}

int Supervisor::finish() {
  int status = 0;
  if (first_failed_ >= 0) {
    status = ranks_[first_failed_]->exit_status();
  } else if (received_signal_ != 0) {
    status = 128 + received_signal_;
  }
  if (status == 0) return 0;
  say("how each rank ended:");
  for (const auto& rank : ranks_) {
    std::string line = "  rank " + std::to_string(rank->index) + " (" + rank->host_label;
    if (rank->pid > 0) line += ", pid " + std::to_string(rank->pid);
    line += "): " + rank->how_it_ended();
    if (rank->index == first_failed_) {
      line += "  <- first to fail";
    } else if (!rank->signals_sent.empty()) {
      line += " (the launcher sent it " + sent_signals(rank->signals_sent) + ")";
    }
    say(line);
  }
  if (first_failed_ >= 0) {
    say("exit status " + std::to_string(status) + ", from rank " + std::to_string(first_failed_));
  } else {
    say("exit status " + std::to_string(status) + ", stopped by " + signal_name(received_signal_));
  }
  return status;
}

}  // namespace giant::launch
