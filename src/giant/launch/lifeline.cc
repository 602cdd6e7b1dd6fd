#include "giant/launch/lifeline.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "giant/base/error.h"

namespace giant::launch {
namespace {

// One record per message (SOCK_SEQPACKET keeps them apart): a positive value
// holds that group, a negative one releases it, 0 is the goodbye.
using Record = int32_t;
constexpr Record kGoodbye = 0;

// What the watcher works with. Filled before the fork: the watcher runs only
// async-signal-safe calls (the launcher may have threads) and allocates nothing.
struct WatcherState {
  int socket_fd = -1;
  pid_t* groups = nullptr;  // 0: a free slot
  int capacity = 0;
  const char* remove_on_death = nullptr;  // empty: nothing
  const char* notice = nullptr;
  size_t notice_size = 0;
};

// Alone in a process group of its own, so that what is meant for the
// launcher's job (Ctrl-C, `timeout -s KILL`'s group kill, a terminal hangup)
// does not end it with the launcher; SIGTERM still ends it. Its stdin and
// stdout are closed, stderr is kept for the notice. Returns the socket's fd.
int become_watcher(int socket_fd) {
  ::setpgid(0, 0);
  struct sigaction action {};
  ::sigemptyset(&action.sa_mask);
  for (int signo = 1; signo < NSIG; ++signo) {
    // The launcher's handlers write to its signal pipe: none may run here.
    bool ignore = signo == SIGINT || signo == SIGQUIT || signo == SIGHUP || signo == SIGTSTP ||
                  signo == SIGTTIN || signo == SIGTTOU || signo == SIGPIPE;
    action.sa_handler = ignore ? SIG_IGN : SIG_DFL;
    ::sigaction(signo, &action, nullptr);  // fails harmlessly for SIGKILL, SIGSTOP and libc's own
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Above stderr, so that closing the rest cannot hit it (a launcher started
  // with stdin closed may have got it as fd 0).
  const int fd = ::fcntl(socket_fd, F_DUPFD, 3);
  if (fd < 0) return socket_fd;
  ::close(0);
  ::close(1);
  // Copies of the launcher's descriptors (its signal pipe, files of the
  // caller) must not stay open in here.
  if (fd > 3) ::close_range(3, static_cast<unsigned>(fd) - 1, 0);
  ::close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
  return fd;
}

void remember(const WatcherState& state, Record record) {
  const pid_t group = record > 0 ? record : -record;
  for (int i = 0; i < state.capacity; ++i) {
    if (record > 0 && state.groups[i] == 0) {
      state.groups[i] = group;
      return;
    }
    if (record < 0 && state.groups[i] == group) {
      state.groups[i] = 0;
      return;
    }
  }
}

[[noreturn]] void run_watcher(const WatcherState& state) {
  const int socket_fd = become_watcher(state.socket_fd);
  while (true) {
    Record record = 0;
    ssize_t n = ::recv(socket_fd, &record, sizeof record, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof record)) break;  // 0: the launcher's end closed; it died
    if (record == kGoodbye) ::_exit(0);
    remember(state, record);
  }
  bool killed = false;
  for (int i = 0; i < state.capacity; ++i) {
    if (state.groups[i] == 0) continue;
    killed = ::kill(-state.groups[i], SIGKILL) == 0 || killed;
  }
  if (state.remove_on_death[0] != '\0') ::unlink(state.remove_on_death);
  if (killed) {
    [[maybe_unused]] ssize_t n = ::write(2, state.notice, state.notice_size);
  }
  ::_exit(0);
}

}  // namespace

Lifeline::Lifeline(int max_groups, const std::string& remove_on_death) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    throw Error(std::string("cannot create the launcher's lifeline socket: ") + ::strerror(errno));
  }
  // Everything the watcher reads is made here, before the fork.
  std::vector<pid_t> groups(static_cast<size_t>(max_groups > 0 ? max_groups : 1), 0);
  const std::string notice = "giant launch: the launcher (pid " + std::to_string(::getpid()) +
                             ") ended without stopping its ranks; killed them (SIGKILL)\n";
  WatcherState state;
  state.socket_fd = fds[1];
  state.groups = groups.data();
  state.capacity = static_cast<int>(groups.size());
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
}

Lifeline::~Lifeline() {
  send(kGoodbye);
  ::close(socket_);
  while (::waitpid(watcher_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void Lifeline::send(int value) {
  const Record record = value;
  // MSG_NOSIGNAL: a watcher that was killed must not take the launcher with it.
  while (::send(socket_, &record, sizeof record, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

void Lifeline::hold(pid_t group) {
  if (group > 0) send(group);
}

void Lifeline::release(pid_t group) {
  if (group > 0) send(-group);
}

}  // namespace giant::launch
