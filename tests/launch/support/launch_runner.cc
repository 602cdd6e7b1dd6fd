#include "launch/support/launch_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace giant::launch::test {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

LaunchProcess::LaunchProcess(const std::string& program, const std::vector<std::string>& args,
                             const std::vector<std::string>& extra_env) {
  char pattern[] = "/tmp/giant-launch-test-XXXXXX";
  dir_ = ::mkdtemp(pattern);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("D=" + dir_);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> argv{program};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> argv_c, env_c;
  for (auto& a : argv) argv_c.push_back(a.data());
  argv_c.push_back(nullptr);
  for (auto& e : env) env_c.push_back(e.data());
  env_c.push_back(nullptr);
  std::string out = dir_ + "/launch.out";
  std::string err = dir_ + "/launch.err";
  // The test process is single-threaded here, so fork + exec is safe.
  pid_ = ::fork();
  if (pid_ == 0) {
    int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    // The launcher keeps signals that were ignored when it started ignored
    // (as nohup wants); a test run in the background (`&` ignores SIGINT)
    // must not make the signal tests depend on that.
    for (int signo : {SIGINT, SIGTERM, SIGHUP}) ::signal(signo, SIG_DFL);
    ::execve(program.c_str(), argv_c.data(), env_c.data());
    ::_exit(127);
  }
}

LaunchProcess::~LaunchProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // Whatever the ranks left (a failed test must not leave processes around).
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ignored)) {
    std::string name = entry.path().filename();
    if (name.rfind("pid.", 0) == 0 || name.rfind("child.", 0) == 0) {
      pid_t pid = read_pid(entry.path());
      if (pid > 0) ::kill(pid, SIGKILL);
    }
  }
  std::filesystem::remove_all(dir_, ignored);
}

std::optional<int> LaunchProcess::wait(double timeout_seconds) {
  if (reaped_) return std::nullopt;
  auto start = Clock::now();
  while (true) {
    int status = 0;
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      return status;
    }
    if (since(start) > timeout_seconds) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      reaped_ = true;
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string LaunchProcess::out() const { return read_file(dir_ + "/launch.out"); }
std::string LaunchProcess::err() const { return read_file(dir_ + "/launch.err"); }

bool wait_for_files(const std::string& dir, const std::vector<std::string>& names, double timeout_seconds) {
  auto start = Clock::now();
  while (true) {
    bool all = true;
    for (const auto& name : names) all = all && std::filesystem::exists(dir + "/" + name);
    if (all) return true;
    if (since(start) > timeout_seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool wait_for_text(const std::string& path, const std::string& text, double timeout_seconds) {
  auto start = Clock::now();
  while (read_file(path).find(text) == std::string::npos) {
    if (since(start) > timeout_seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

pid_t read_pid(const std::string& path) {
  std::ifstream in(path);
  long pid = -1;
  if (!(in >> pid)) return -1;
  return static_cast<pid_t>(pid);
}

bool process_alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  // "PID (comm) STATE ...": a zombie has ended, only its parent has not reaped it.
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

std::vector<pid_t> alive_after(const std::vector<pid_t>& pids, double timeout_seconds) {
  auto start = Clock::now();
  while (true) {
    std::vector<pid_t> alive;
    for (pid_t pid : pids) {
      if (process_alive(pid)) alive.push_back(pid);
    }
    if (alive.empty() || since(start) > timeout_seconds) return alive;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> children;
  std::error_code ignored;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, ignored)) {
    std::istringstream in(read_file(task.path().string() + "/children"));
    for (long child = 0; in >> child;) children.push_back(static_cast<pid_t>(child));
  }
  return children;
}

std::vector<pid_t> descendants_of(pid_t pid) {
  std::vector<pid_t> all = children_of(pid);
  for (size_t i = 0; i < all.size(); ++i) {
    for (pid_t child : children_of(all[i])) all.push_back(child);
  }
  return all;
}

std::string program_of(pid_t pid) {
  std::string comm = read_file("/proc/" + std::to_string(pid) + "/comm");
  if (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

int shell(const std::string& command) {
  int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace giant::launch::test
