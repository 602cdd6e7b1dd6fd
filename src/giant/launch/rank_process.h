// Starting one rank as a process in a process group of its own (so that the
// processes it starts can be signalled with it), with its stdout and stderr
// on pipes, and describing how it ended.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace giant::launch {

// A file descriptor closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct SpawnRequest {
  std::string executable;         // a path, resolved beforehand
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "NAME=value"
  // The process group to start it in, an existing one of this session (see
  // lifeline.h); 0: a new group led by the rank.
  pid_t process_group = 0;
};

struct SpawnedRank {
  pid_t pid = -1;
  UniqueFd stdout_fd;  // read ends, non-blocking, close-on-exec
  UniqueFd stderr_fd;
};

// posix_spawn: safe while other threads (the store server's) run, unlike
// code between fork and exec. stdin is /dev/null (a rank outside the
// terminal's foreground group must not read it), SIGPIPE is reset to its
// default. Throws giant::Error naming the command when it cannot start.
SpawnedRank spawn_rank(const SpawnRequest& request);

// The executable that `name` runs: name itself if it contains '/', else the
// first executable file called name in the directories of path_variable
// (empty if there is none).
std::string find_executable(const std::string& name, const std::string& path_variable);
// Where system tools such as iproute2's `ip` and `tc` usually live: sbin
// directories, often missing from a user's PATH (append it to one).
inline constexpr const char* kSbinPath = "/usr/local/sbin:/usr/sbin:/sbin";

// "exited with code 3", "was killed by signal 9 (SIGKILL)".
std::string describe_wait_status(int status);
// 0 for success; the exit code; 128 + the signal number for a signal.
int exit_code_of(int status);
bool succeeded(int status);
// "SIGTERM", or "signal 77" for one without a name.
std::string signal_name(int signo);

}  // namespace giant::launch
