// Running ranks as threads (over a MemoryStore) and as forked processes
// (over a TcpStore served by the test process, or a FileStore), with a
// deadline on every wait so that no test can hang.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "giant/base/timer.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/config.h"
#include "giant/ccl/store.h"

namespace giant::ccl::test {

using namespace std::chrono_literals;

// Short timeouts, so a broken library fails a test instead of hanging it.
CommConfig test_config(std::chrono::milliseconds timeout = 30s);

// CLOCK_MONOTONIC in nanoseconds: comparable between processes of one host.
int64_t monotonic_ns();
double seconds_between(int64_t from_ns, int64_t to_ns);

// What an operation failed with, classified by the error taxonomy.
struct ErrorInfo {
  std::string kind = "none";  // none, TimeoutError, CommError, Error, std::exception, unknown
  int peer = -2;              // CommError::peer(); -2 when not a CommError
  std::string what;

  static ErrorInfo from(const std::exception_ptr& error);
  bool is_comm_error() const { return kind == "CommError" || kind == "TimeoutError"; }
  std::string describe() const;
};

// Runs body(rank) on n threads and joins them. An exception escaping a rank
// becomes a gtest failure naming the rank. gtest assertions may be used in
// body. If the threads have not all returned by the deadline the test
// program is aborted (a stuck thread cannot be killed, and returning would
// leave it running on freed state).
void run_threads(int n, const std::function<void(int rank)>& body,
                 std::chrono::milliseconds deadline = 180s);

// Ranks as threads: a MemoryStore shared by n threads, each creating its
// Communicator::create(store, rank, n, config) and passing it to body.
void run_comm_threads(int n, const std::function<void(Communicator& comm)>& body,
                      const CommConfig& config = test_config(),
                      std::chrono::milliseconds deadline = 180s);
// As above, with a per-rank config.
void run_comm_threads(int n, const std::function<void(Communicator& comm)>& body,
                      const std::function<CommConfig(int rank)>& config_of,
                      std::chrono::milliseconds deadline = 180s);

enum class StoreKind { tcp, file };

// What a forked rank sees. It must only use what it finds here (and its own
// objects): the parent's objects, e.g. its store server, live in the parent.
struct ProcessContext {
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store;
  std::string directory;  // a temporary directory of the group

  // Appends a line to this rank's report (kept even if the rank is killed).
  void report(const std::string& line) const;
  // Records a named value the parent reads with ProcessGroup::value; also a
  // marker the parent can wait for.
  void put(const std::string& key, const std::string& value = "") const;
};

// Returns the exit code (0: success). Exceptions become exit code 2, and a
// gtest failure inside the child exit code 3.
using ProcessBody = std::function<int(ProcessContext& context)>;

struct ProcessOptions {
  StoreKind store = StoreKind::tcp;
  std::chrono::milliseconds deadline = 180s;  // for the whole group
  // Run in each forked rank before it opens the store or runs the body (e.g.
  // to enter a network namespace); an exception fails the rank (exit code 2).
  std::function<void(int rank)> before_rank;
};

struct RankExit {
  int rank = 0;
  bool ended = false;             // the parent saw it end
  bool exited = false;            // ended through exit/_exit (exit_code valid)
  int exit_code = -1;
  int term_signal = 0;            // the signal that ended it, if any
  bool killed_at_deadline = false;
  int64_t ended_ns = 0;           // monotonic_ns() when the parent saw it end
  std::string report;             // the lines of ProcessContext::report

  bool ok() const { return exited && exit_code == 0; }
  std::string describe() const;
};

// A group of forked ranks that share a store. The destructor kills (SIGKILL)
// and reaps every rank still running and removes the temporary directory.
class ProcessGroup {
 public:
  ProcessGroup(int size, ProcessBody body, ProcessOptions options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int size() const { return size_; }
  const std::string& directory() const { return directory_; }
  pid_t pid(int rank) const { return pids_.at(rank); }
  void signal(int rank, int sig);

  // Waits until `rank` put `key`; false if the deadline passed or the rank
  // ended without it.
  bool wait_for(int rank, const std::string& key, const Deadline& deadline);
  // The value `rank` put under `key`, if it did.
  std::optional<std::string> value(int rank, const std::string& key) const;
  // Waits until `rank` ended, or the deadline; true if it ended.
  bool wait_rank(int rank, const Deadline& deadline);
  // Waits for every rank until the group's deadline, kills the rest, and
  // returns how each ended (with its report).
  const std::vector<RankExit>& wait_all();
  // Kills (SIGKILL) and reaps one rank (SIGCONT first, in case it is stopped).
  void kill_rank(int rank);

 private:
  void poll_children();
  void reap(int rank, int status);
  std::string report_path(int rank) const;

  int size_;
  ProcessOptions options_;
  Deadline deadline_;
  std::string directory_;
  std::unique_ptr<TcpStoreServer> server_;
  std::vector<pid_t> pids_;
  std::vector<RankExit> exits_;
};

// Forks `size` ranks running body, waits for them all and returns how each
// ended.
std::vector<RankExit> run_processes(int size, const ProcessBody& body, ProcessOptions options = {});

// A gtest failure for every rank that did not end with exit code 0.
void expect_all_ok(const std::vector<RankExit>& exits, const std::string& context);

// Creates a fresh temporary directory (mkdtemp) and returns its path.
std::string make_temp_directory();

// A fresh temporary directory, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace giant::ccl::test
