#include "ccl/support/ranks.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "giant/base/error.h"

namespace giant::ccl::test {

CommConfig test_config(std::chrono::milliseconds timeout) {
  CommConfig config;
  config.timeout = timeout;
  config.connect_timeout = 30s;
  return config;
}

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double seconds_between(int64_t from_ns, int64_t to_ns) { return (to_ns - from_ns) * 1e-9; }

ErrorInfo ErrorInfo::from(const std::exception_ptr& error) {
  ErrorInfo info;
  if (!error) return info;
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    info = {"TimeoutError", e.peer(), e.what()};
  } catch (const CommError& e) {
    info = {"CommError", e.peer(), e.what()};
  } catch (const Error& e) {
    info = {"Error", -2, e.what()};
  } catch (const std::exception& e) {
    info = {"std::exception", -2, e.what()};
  } catch (...) {
    info = {"unknown", -2, "(not a std::exception)"};
  }
  return info;
}

std::string ErrorInfo::describe() const {
  if (kind == "none") return "no error";
  std::string out = kind;
  if (is_comm_error()) out += " (peer " + std::to_string(peer) + ")";
  return out + ": " + what;
}

void run_threads(int n, const std::function<void(int rank)>& body,
                 std::chrono::milliseconds deadline) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable done_cv;
    std::vector<bool> done;
    std::vector<std::string> errors;
  };
  auto shared = std::make_shared<Shared>();
  shared->done.assign(n, false);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&body, shared, rank] {
      std::string error;
      try {
        body(rank);
      } catch (...) {
        error = ErrorInfo::from(std::current_exception()).describe();
      }
      std::lock_guard<std::mutex> lock(shared->mutex);
      if (!error.empty()) shared->errors.push_back("rank " + std::to_string(rank) + " threw " + error);
      shared->done[rank] = true;
      shared->done_cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(shared->mutex);
    auto all_done = [&] {
      for (bool d : shared->done)
        if (!d) return false;
      return true;
    };
    if (!shared->done_cv.wait_for(lock, deadline, all_done)) {
      std::string stuck;
      for (int rank = 0; rank < n; ++rank)
        if (!shared->done[rank]) stuck += " " + std::to_string(rank);
      std::fprintf(stderr, "run_threads: ranks%s still running after %lld ms; aborting the test program\n",
                   stuck.c_str(), static_cast<long long>(deadline.count()));
      std::fflush(nullptr);
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
  for (const auto& e : shared->errors) ADD_FAILURE() << e;
}

void run_comm_threads(int n, const std::function<void(Communicator& comm)>& body,
                      const CommConfig& config, std::chrono::milliseconds deadline) {
  run_comm_threads(n, body, [&config](int) { return config; }, deadline);
}

void run_comm_threads(int n, const std::function<void(Communicator& comm)>& body,
                      const std::function<CommConfig(int rank)>& config_of,
                      std::chrono::milliseconds deadline) {
  auto store = std::make_shared<MemoryStore>();
  run_threads(
      n,
      [&](int rank) {
        auto comm = Communicator::create(store, rank, n, config_of(rank));
        body(*comm);
      },
      deadline);
}

namespace {

void write_file(const std::string& path, const std::string& text, bool append) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0600);
  if (fd < 0) return;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string key_path(const std::string& directory, int rank, const std::string& key) {
  return directory + "/rank" + std::to_string(rank) + ".key." + key;
}

[[noreturn]] void run_child(ProcessContext context, const ProcessBody& body, const ProcessOptions& options,
                            int port_pipe, const std::string& secret, pid_t parent, int alarm_seconds) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test process
  if (::getppid() != parent) ::_exit(96);
  ::alarm(static_cast<unsigned>(alarm_seconds));  // nor the group's deadline
  // The parent starts its store server only after forking every rank: a fork
  // while server threads run can leave a child with a lock held for ever
  // (seen with AddressSanitizer's allocator).
  int port = 0;
  if (::read(port_pipe, &port, sizeof port) != static_cast<ssize_t>(sizeof port)) ::_exit(97);
  ::close(port_pipe);
  int code = 0;
  try {
    if (options.before_rank) options.before_rank(context.rank);
    if (options.store == StoreKind::tcp) {
      context.store = std::make_shared<TcpStore>("127.0.0.1", port, secret, 30s);
    } else {
      context.store = std::make_shared<FileStore>(context.directory + "/store");
    }
    code = body(context);
  } catch (...) {
    context.report("uncaught " + ErrorInfo::from(std::current_exception()).describe());
    code = 2;
  }
  if (code == 0 && ::testing::Test::HasFailure()) {
    context.report("a gtest assertion failed in this rank (see its output)");
    code = 3;
  }
  std::fflush(nullptr);
  ::_exit(code);  // no destructors or atexit handlers of the parent's objects
}

}  // namespace

void ProcessContext::report(const std::string& line) const {
  write_file(directory + "/rank" + std::to_string(rank) + ".report", line + "\n", true);
}

void ProcessContext::put(const std::string& key, const std::string& value) const {
  const std::string path = key_path(directory, rank, key);
  write_file(path + ".tmp", value, false);
  ::rename((path + ".tmp").c_str(), path.c_str());
}

std::string RankExit::describe() const {
  std::ostringstream out;
  out << "rank " << rank << ": ";
  if (!ended) {
    out << "still running";
  } else if (killed_at_deadline) {
    out << "killed at the deadline";
  } else if (exited) {
    out << "exit code " << exit_code;
  } else {
    out << "ended by signal " << term_signal << " (" << strsignal(term_signal) << ")";
  }
  if (!report.empty()) out << "; its report:\n" << report;
  return out.str();
}

ProcessGroup::ProcessGroup(int size, ProcessBody body, ProcessOptions options)
    : size_(size), options_(options), deadline_(Deadline::after(options.deadline)) {
  directory_ = make_temp_directory();
  const std::string secret = "giant-test-secret-" + std::to_string(::getpid());
  if (options.store == StoreKind::file) ::mkdir((directory_ + "/store").c_str(), 0700);
  exits_.resize(size);
  const pid_t parent = ::getpid();
  const int alarm_seconds =
      static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(options.deadline).count()) + 10;
  std::vector<int> port_pipes;
  for (int rank = 0; rank < size; ++rank) {
    exits_[rank].rank = rank;
    int pipe_fds[2] = {-1, -1};
    if (::pipe(pipe_fds) != 0) {
      ADD_FAILURE() << "pipe failed: " << std::strerror(errno);
      exits_[rank].ended = true;
      pids_.push_back(-1);
      continue;
    }
    std::fflush(nullptr);  // or the child would print the parent's buffered output again
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pipe_fds[1]);
      for (int fd : port_pipes) ::close(fd);
      ProcessContext context;
      context.rank = rank;
      context.size = size;
      context.directory = directory_;
      run_child(std::move(context), body, options, pipe_fds[0], secret, parent, alarm_seconds);
    }
    ::close(pipe_fds[0]);
    port_pipes.push_back(pipe_fds[1]);
    if (pid < 0) {
      ADD_FAILURE() << "fork failed: " << std::strerror(errno);
      exits_[rank].ended = true;
    }
    pids_.push_back(pid);
  }
  int port = 0;
  ::signal(SIGPIPE, SIG_IGN);  // a rank that died early must not take the test process with it
  if (options.store == StoreKind::tcp) {
    server_ = std::make_unique<TcpStoreServer>("127.0.0.1", 0, secret);
    port = server_->port();
  }
  for (int fd : port_pipes) {
    ssize_t written = ::write(fd, &port, sizeof port);
    (void)written;  // a rank that is already gone reports itself through its exit
    ::close(fd);
  }
}

ProcessGroup::~ProcessGroup() {
  for (int rank = 0; rank < size_; ++rank) {
    if (!exits_[rank].ended && pids_[rank] > 0) kill_rank(rank);
  }
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

void ProcessGroup::signal(int rank, int sig) {
  if (!exits_.at(rank).ended) ::kill(pids_.at(rank), sig);
}

std::string ProcessGroup::report_path(int rank) const {
  return directory_ + "/rank" + std::to_string(rank) + ".report";
}

void ProcessGroup::reap(int rank, int status) {
  RankExit& e = exits_[rank];
  e.ended = true;
  e.ended_ns = monotonic_ns();
  if (WIFEXITED(status)) {
    e.exited = true;
    e.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    e.term_signal = WTERMSIG(status);
  }
  e.report = read_file(report_path(rank)).value_or("");
}

void ProcessGroup::poll_children() {
  for (int rank = 0; rank < size_; ++rank) {
    if (exits_[rank].ended || pids_[rank] <= 0) continue;
    int status = 0;
    if (::waitpid(pids_[rank], &status, WNOHANG) == pids_[rank]) reap(rank, status);
  }
}

bool ProcessGroup::wait_rank(int rank, const Deadline& deadline) {
  for (;;) {
    poll_children();
    if (exits_.at(rank).ended) return true;
    if (deadline.expired() || deadline_.expired()) return false;
    std::this_thread::sleep_for(2ms);
  }
}

bool ProcessGroup::wait_for(int rank, const std::string& key, const Deadline& deadline) {
  for (;;) {
    if (value(rank, key)) return true;
    poll_children();
    if (exits_.at(rank).ended) return value(rank, key).has_value();
    if (deadline.expired() || deadline_.expired()) return false;
    std::this_thread::sleep_for(2ms);
  }
}

std::optional<std::string> ProcessGroup::value(int rank, const std::string& key) const {
  return read_file(key_path(directory_, rank, key));
}

void ProcessGroup::kill_rank(int rank) {
  if (exits_.at(rank).ended || pids_[rank] <= 0) return;
  ::kill(pids_[rank], SIGKILL);
  ::kill(pids_[rank], SIGCONT);
  int status = 0;
  while (::waitpid(pids_[rank], &status, 0) < 0 && errno == EINTR) {
  }
  reap(rank, status);
}

const std::vector<RankExit>& ProcessGroup::wait_all() {
  for (;;) {
    poll_children();
    bool all_ended = true;
    for (const auto& e : exits_) all_ended = all_ended && e.ended;
    if (all_ended) break;
    if (deadline_.expired()) {
      for (int rank = 0; rank < size_; ++rank) {
        if (exits_[rank].ended) continue;
        kill_rank(rank);
        exits_[rank].killed_at_deadline = true;
      }
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  return exits_;
}

std::vector<RankExit> run_processes(int size, const ProcessBody& body, ProcessOptions options) {
  ProcessGroup group(size, body, options);
  return group.wait_all();
}

void expect_all_ok(const std::vector<RankExit>& exits, const std::string& context) {
  for (const auto& e : exits) {
    if (!e.ok()) ADD_FAILURE() << context << ": " << e.describe();
  }
}

std::string make_temp_directory() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/giant-ccl-test-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  return name.data();
}

TempDir::TempDir() : path_(make_temp_directory()) {}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace giant::ccl::test
