#include "giant/launch/lifeline.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

#include "giant/base/error.h"

namespace giant::launch {
namespace {

// One record per message (SOCK_SEQPACKET keeps them apart). Watcher to
// launcher: each group's id as it is made, or -errno when one cannot be.
// Launcher to watcher: the goodbye.
using Record = int32_t;
constexpr Record kGoodbye = 0;

// Once the launcher has died, the watcher kills the groups again after these
// pauses: a rank that was being started at that moment joins its group a
// moment later (posix_spawn's child runs setpgid before exec).
constexpr long kSweepPausesMs[] = {0, 100, 400};

// What the watcher works with, made before the fork: the watcher runs only
// async-signal-safe calls (the launcher may have threads) and allocates nothing.
struct WatcherState {
  int socket_fd = -1;
  pid_t* anchors = nullptr;  // one per group, leading it
  int groups = 0;
  const char* remove_on_death = nullptr;  // empty: nothing
  const char* notice = nullptr;
  size_t notice_size = 0;
};

// Every signal to SIG_IGN where ignore(signo), else SIG_DFL, and none
// blocked: the launcher's handlers (they write to its signal pipe) must not
// run in here.
template <typename Ignore>
void reset_signals(Ignore ignore) {
  struct sigaction action {};
  ::sigemptyset(&action.sa_mask);
  for (int signo = 1; signo < NSIG; ++signo) {
    action.sa_handler = ignore(signo) ? SIG_IGN : SIG_DFL;
    ::sigaction(signo, &action, nullptr);  // fails harmlessly for SIGKILL, SIGSTOP and libc's own
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// In its rank's group, the anchor gets the signals meant for the rank (a
// forwarded SIGTERM) and ignores them; SIGKILL ends it with the group.
[[noreturn]] void run_anchor() {
  reset_signals([](int) { return true; });
  ::close_range(0, ~0U, 0);
  while (true) ::pause();
}

// The watcher keeps only the socket (returned, moved above stderr so that a
// launcher started with stdin closed cannot have it at fd 0) and stderr.
int keep_only_socket_and_stderr(int socket_fd) {
  const int fd = ::fcntl(socket_fd, F_DUPFD, 3);
  if (fd < 0) return socket_fd;
  ::close(0);
  ::close(1);
  if (fd > 3) ::close_range(3, static_cast<unsigned>(fd) - 1, 0);
  ::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
  return fd;
}

bool send_record(int fd, Record record) {
  ssize_t n;
  while ((n = ::send(fd, &record, sizeof record, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == static_cast<ssize_t>(sizeof record);
}

// Ends the anchors made so far (made: how many) and reaps them.
void end_anchors(const WatcherState& state, int made) {
  for (int i = 0; i < made; ++i) ::kill(state.anchors[i], SIGKILL);
  for (int i = 0; i < made; ++i) {
    while (::waitpid(state.anchors[i], nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

// Makes the groups and tells the launcher their ids; false (after telling
// it why) when one cannot be made.
bool make_groups(const WatcherState& state, int fd) {
  for (int i = 0; i < state.groups; ++i) {
    const pid_t pid = ::_Fork();
    if (pid == 0) run_anchor();
    if (pid > 0) state.anchors[i] = pid;
    // Here, not in the anchor: the group must exist once the launcher hears of it.
    if (pid < 0 || ::setpgid(pid, pid) != 0) {
      const Record error = -errno;
      end_anchors(state, pid < 0 ? i : i + 1);
      send_record(fd, error);
      return false;
    }
    if (!send_record(fd, pid)) {
      end_anchors(state, i + 1);
      return false;
    }
  }
  return true;
}

[[noreturn]] void remove_and_exit(const WatcherState& state, int status) {
  if (state.remove_on_death[0] != '\0') ::unlink(state.remove_on_death);
  ::_exit(status);
}

// Alone in a process group of its own, so that what is meant for the
// launcher's job (Ctrl-C, `timeout -s KILL`'s group kill, a terminal hangup)
// does not end it with the launcher; SIGTERM still ends it.
[[noreturn]] void run_watcher(const WatcherState& state) {
  ::setpgid(0, 0);
  reset_signals([](int signo) {
    return signo == SIGINT || signo == SIGQUIT || signo == SIGHUP || signo == SIGTSTP || signo == SIGTTIN ||
           signo == SIGTTOU || signo == SIGPIPE;
  });
  const int fd = keep_only_socket_and_stderr(state.socket_fd);
  // No groups: the launcher fails to start (or died while it was starting);
  // no rank runs.
  if (!make_groups(state, fd)) remove_and_exit(state, 1);
  Record record = -1;
  while (true) {
    ssize_t n = ::recv(fd, &record, sizeof record, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof record) || record == kGoodbye) break;  // 0: the launcher's end closed
  }
  if (record == kGoodbye) {
    end_anchors(state, state.groups);
    ::_exit(0);
  }
  for (size_t sweep = 0; sweep < sizeof kSweepPausesMs / sizeof kSweepPausesMs[0]; ++sweep) {
    struct timespec pause = {kSweepPausesMs[sweep] / 1000, (kSweepPausesMs[sweep] % 1000) * 1000000};
    while (::nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
    for (int i = 0; i < state.groups; ++i) ::kill(-state.anchors[i], SIGKILL);
    if (sweep == 0) {
      [[maybe_unused]] ssize_t n = ::write(2, state.notice, state.notice_size);
    }
  }
  end_anchors(state, state.groups);
  remove_and_exit(state, 0);
}

void say_goodbye_and_reap(int socket_fd, pid_t watcher) {
  send_record(socket_fd, kGoodbye);  // fails harmlessly when the watcher is gone
  ::close(socket_fd);
  while (::waitpid(watcher, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

Lifeline::Lifeline(int groups, const std::string& remove_on_death) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    throw Error(std::string("cannot create the launcher's lifeline socket: ") + ::strerror(errno));
  }
  std::vector<pid_t> anchors(static_cast<size_t>(groups > 0 ? groups : 0), 0);
  const std::string notice = "giant launch: the launcher (pid " + std::to_string(::getpid()) +
                             ") ended without stopping its ranks; killed them (SIGKILL)\n";
  WatcherState state;
  state.socket_fd = fds[1];
  state.anchors = anchors.data();
  state.groups = static_cast<int>(anchors.size());
  state.remove_on_death = remove_on_death.c_str();
  state.notice = notice.data();
  state.notice_size = notice.size();

  // No signal may run the launcher's handlers in the watcher before it has
  // put its own in place. _Fork, not fork: no atfork handlers run, since
  // other threads may hold the locks those take.
  sigset_t all, saved;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = ::_Fork();
  if (pid == 0) run_watcher(state);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    throw Error(std::string("cannot start the launcher's watcher process: ") + ::strerror(fork_errno));
  }
  socket_ = fds[0];
  watcher_ = pid;

  while (static_cast<int>(groups_.size()) < state.groups) {
    Record record = 0;
    ssize_t n = ::recv(socket_, &record, sizeof record, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == static_cast<ssize_t>(sizeof record) && record > 0) {
      groups_.push_back(record);
      continue;
    }
    const int error = n == static_cast<ssize_t>(sizeof record) ? -record : n < 0 ? errno : 0;
    say_goodbye_and_reap(socket_, watcher_);
    throw Error(std::string("cannot make the ranks' process groups: ") +
                (error != 0 ? ::strerror(error) : "the watcher process ended"));
  }
}

Lifeline::~Lifeline() { say_goodbye_and_reap(socket_, watcher_); }

}  // namespace giant::launch
