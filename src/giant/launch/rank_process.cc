#include "giant/launch/rank_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "giant/base/error.h"

namespace giant::launch {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

// Both ends close-on-exec: the child gets its copies by dup2 only, so no rank
// holds another rank's pipe open.
void make_pipe(UniqueFd* read_end, UniqueFd* write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(std::string("cannot create a pipe: ") + ::strerror(errno));
  }
  read_end->reset(fds[0]);
  write_end->reset(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
}

// Owns posix_spawn's attribute and file-action objects.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    ::posix_spawnattr_init(&attr);
    ::posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    ::posix_spawn_file_actions_destroy(&actions);
    ::posix_spawnattr_destroy(&attr);
  }
};

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

SpawnedRank spawn_rank(const SpawnRequest& request) {
  GIANT_CHECK(!request.argv.empty(), "a command to run");
  SpawnedRank rank;
  UniqueFd out_write, err_write;
  make_pipe(&rank.stdout_fd, &out_write);
  make_pipe(&rank.stderr_fd, &err_write);

  SpawnSetup setup;
  ::posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&setup.actions, out_write.get(), 1);
  ::posix_spawn_file_actions_adddup2(&setup.actions, err_write.get(), 2);
  sigset_t defaults;
  ::sigemptyset(&defaults);
  ::sigaddset(&defaults, SIGPIPE);  // the launcher ignores it; ranks should not
  ::posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  // The child joins the group before exec, so the rank never runs outside it.
  ::posix_spawnattr_setpgroup(&setup.attr, request.process_group);
  ::posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> argv = c_strings(request.argv);
  std::vector<char*> env = c_strings(request.env);
  int error = ::posix_spawn(&rank.pid, request.executable.c_str(), &setup.actions, &setup.attr, argv.data(),
                            env.data());
  if (error != 0) {
    throw Error("cannot run '" + request.executable + "': " + ::strerror(error));
  }
  return rank;  // the write ends close here: only the rank holds them now
}

std::string find_executable(const std::string& name, const std::string& path_variable) {
  auto executable = [](const std::string& path) {
    struct stat info {};
    return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  size_t start = 0;
  while (start <= path_variable.size()) {
    size_t colon = path_variable.find(':', start);
    if (colon == std::string::npos) colon = path_variable.size();
    std::string dir = path_variable.substr(start, colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (executable(candidate)) return candidate;
    start = colon + 1;
  }
  return "";
}

std::string signal_name(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);
  if (abbrev == nullptr) return "signal " + std::to_string(signo);
  return std::string("SIG") + abbrev;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int signo = WTERMSIG(status);
    return "was killed by signal " + std::to_string(signo) + " (" + signal_name(signo) + ")" +
           (WCOREDUMP(status) ? ", core dumped" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace giant::launch
