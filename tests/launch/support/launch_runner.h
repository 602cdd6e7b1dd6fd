// Runs `giant launch` (the test CLI program) as a child process of the test,
// with its stdout and stderr in files of a temporary directory, and looks at
// the processes it started.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace giant::launch::test {

class LaunchProcess {
 public:
  // Runs program with args; extra_env ("NAME=value") is added to this
  // process's environment, and so is D=dir(), a new temporary directory
  // where ranks can leave files (pid.R and child.R name processes to kill
  // at the end).
  LaunchProcess(const std::string& program, const std::vector<std::string>& args,
                const std::vector<std::string>& extra_env = {});
  // Kills it (and its ranks, by the pids they wrote) if still running, and
  // removes the directory.
  ~LaunchProcess();
  LaunchProcess(const LaunchProcess&) = delete;
  LaunchProcess& operator=(const LaunchProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& dir() const { return dir_; }
  // The wait status, or nullopt if it still ran after timeout_seconds (then
  // it is killed).
  std::optional<int> wait(double timeout_seconds);
  std::string out() const;
  std::string err() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  std::string dir_;
};

// Waits until dir holds every file named; false at the timeout.
bool wait_for_files(const std::string& dir, const std::vector<std::string>& names, double timeout_seconds);
// Waits until the file contains text; false at the timeout.
bool wait_for_text(const std::string& path, const std::string& text, double timeout_seconds);
// The pid in a file written by a rank (-1 if unreadable).
pid_t read_pid(const std::string& path);
// Whether pid is a live process (a zombie counts as dead).
bool process_alive(pid_t pid);
// The pids among these that are still alive, after waiting up to
// timeout_seconds for them to go (init may take a moment to reap).
std::vector<pid_t> alive_after(const std::vector<pid_t>& pids, double timeout_seconds);
// The children of pid, from every thread's /proc/PID/task/TID/children.
std::vector<pid_t> children_of(pid_t pid);
// Its children, theirs, and so on.
std::vector<pid_t> descendants_of(pid_t pid);
// The program a process runs (/proc/PID/comm), "" if it is gone.
std::string program_of(pid_t pid);

std::string read_file(const std::string& path);
std::vector<std::string> lines_of(const std::string& text);
// Runs a shell command; returns its exit status (-1 if it could not run).
int shell(const std::string& command);

}  // namespace giant::launch::test
