// Pieces shared by giant-ccl-bench and its peer gloo-allreduce-bench, so that
// both parse flags, launch ranks and print results the same way.
//
// Header-only and free of Giant's libraries on purpose: the peer benchmark
// must build (and keep measuring) even while giant_ccl does not.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace giant::bench {

// Exit codes of a rank process, so the launcher can tell "ran but computed
// wrong results" from "crashed or failed to communicate".
constexpr int kExitOk = 0;
constexpr int kExitWrongResults = 3;
constexpr int kExitError = 4;

// ---------------------------------------------------------------- parsing

// "64MiB", "1.5 KiB", "1GB", "8" (bytes). Throws std::invalid_argument.
inline int64_t parse_size(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value) || value < 0)
    throw std::invalid_argument("expected a byte size such as 64MiB, got '" + text + "'");
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "k" || unit == "kib") scale = 1024.0;
  else if (unit == "m" || unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  if (scale == 0) throw std::invalid_argument("unknown byte unit in '" + text + "'");
  return static_cast<int64_t>(std::llround(value * scale));
}

// "60s", "500ms", "2m", "30us" or plain seconds. Throws std::invalid_argument.
inline double parse_seconds(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value) || value < 0)
    throw std::invalid_argument("expected a duration such as 60s, got '" + text + "'");
  std::string unit(end);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "us") scale = 1e-6;
  else if (unit == "m" || unit == "min") scale = 60;
  else if (unit == "h") scale = 3600;
  if (scale == 0) throw std::invalid_argument("unknown time unit in '" + text + "'");
  return value * scale;
}

inline int parse_int(const std::string& text, const std::string& flag, int min_value) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value < min_value || value > 1000000000)
    throw std::invalid_argument(flag + " expects an integer >= " + std::to_string(min_value) +
                                ", got '" + text + "'");
  return static_cast<int>(value);
}

inline std::vector<std::string> split_list(const std::string& text, char separator = ',') {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, separator))
    if (!item.empty()) items.push_back(item);
  return items;
}

// Walks argv as "--flag value" or "--flag=value".
class FlagReader {
 public:
  FlagReader(int argc, char** argv) : args_(argv + 1, argv + argc) {}
  bool next() {
    if (index_ >= args_.size()) return false;
    std::string arg = args_[index_++];
    if (arg.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument '" + arg + "'");
    size_t eq = arg.find('=');
    flag_ = arg.substr(0, eq);
    inline_value_ = eq != std::string::npos;
    if (inline_value_) inline_text_ = arg.substr(eq + 1);
    return true;
  }
  const std::string& flag() const { return flag_; }
  std::string value() {
    if (inline_value_) return inline_text_;
    if (index_ >= args_.size()) throw std::invalid_argument(flag_ + " needs a value");
    return args_[index_++];
  }

 private:
  std::vector<std::string> args_;
  size_t index_ = 0;
  std::string flag_;
  bool inline_value_ = false;
  std::string inline_text_;
};

// ------------------------------------------------------------ bandwidth

// nccl-tests convention (docs/reference/published-figures.md): busbw = algbw * factor,
// comparable with one rank's link bandwidth whatever the algorithm.
inline double busbw_factor(const std::string& collective, int nproc) {
  const double n = nproc;
  if (nproc <= 1) return 1.0;
  if (collective == "allreduce") return 2.0 * (n - 1) / n;
  // S is the total (gathered / unscattered) size; each rank moves (n-1)/n of it.
  // gather and scatter are the rooted forms of allgather / reduce_scatter's
  // data movement: the root's link carries (n-1)/n of S, so the same factor.
  if (collective == "reduce_scatter" || collective == "allgather" || collective == "alltoall" ||
      collective == "gather" || collective == "scatter")
    return (n - 1) / n;
  return 1.0;  // broadcast, reduce, sendrecv
}

// One measurement, printed both as a table row and as a key=value line.
struct Measurement {
  std::string bench;  // "ccl" or "gloo"
  std::string collective;
  int nproc = 0;
  int64_t bytes = 0;
  int64_t count = 0;
  std::string dtype;
  std::string op;  // "-" when there is no reduction
  int root = -1;   // -1 when not rooted
  std::string algorithm;  // empty: not applicable
  int iters = 0;
  int rep = 0;
  double time_us = 0;
  int64_t wrong = 0;
  std::string transport;
  std::vector<std::pair<std::string, std::string>> extra;  // appended key=value pairs

  double algbw_gbps() const { return time_us > 0 ? bytes / (time_us * 1e-6) / 1e9 : 0; }
  double busbw_gbps() const { return algbw_gbps() * busbw_factor(collective, nproc); }
};

inline void print_table_header(const std::string& title) {
  std::printf("#\n# %s\n", title.c_str());
  std::printf("# %12s %12s %6s %6s %5s %5s %4s %11s %8s %8s %8s\n", "size", "count", "type", "redop",
              "root", "iters", "rep", "time", "algbw", "busbw", "#wrong");
  std::printf("# %12s %12s %6s %6s %5s %5s %4s %11s %8s %8s %8s\n", "(B)", "(elements)", "", "", "",
              "", "", "(us)", "(GB/s)", "(GB/s)", "");
}

inline void print_measurement(const Measurement& m) {
  std::printf("  %12lld %12lld %6s %6s %5d %5d %4d %11.2f %8.3f %8.3f %8lld\n",
              static_cast<long long>(m.bytes), static_cast<long long>(m.count), m.dtype.c_str(),
              m.op.c_str(), m.root, m.iters, m.rep, m.time_us, m.algbw_gbps(), m.busbw_gbps(),
              static_cast<long long>(m.wrong));
  std::printf("bench=%s collective=%s nproc=%d bytes=%lld count=%lld dtype=%s op=%s root=%d",
              m.bench.c_str(), m.collective.c_str(), m.nproc, static_cast<long long>(m.bytes),
              static_cast<long long>(m.count), m.dtype.c_str(), m.op.c_str(), m.root);
  if (!m.algorithm.empty()) std::printf(" algorithm=%s", m.algorithm.c_str());
  std::printf(" iters=%d rep=%d time_us=%.2f algbw_gbps=%.4f busbw_gbps=%.4f wrong=%lld transport=%s",
              m.iters, m.rep, m.time_us, m.algbw_gbps(), m.busbw_gbps(),
              static_cast<long long>(m.wrong), m.transport.c_str());
  for (const auto& [key, value] : m.extra) std::printf(" %s=%s", key.c_str(), value.c_str());
  std::printf("\n");
  std::fflush(stdout);
}

// The single-thread memcpy bandwidth of this machine: the limit printed next
// to every benchmark run (a figure is never shown without its peer or limit).
inline double measure_memcpy_gbps(size_t bytes = size_t{64} << 20, int repeats = 5) {
  std::vector<char> source(bytes, 1), target(bytes, 0);
  double best = 0;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::copy(source.begin(), source.end(), target.begin());
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    source[i % bytes] = target[(i * 7) % bytes];  // keep the copy observable
    best = std::max(best, bytes / seconds / 1e9);
  }
  return best;
}

// -------------------------------------------------------- rank processes

// Forks one process per rank. Each runs body(rank) and _exits with its
// result (an escaping exception is reported and becomes kExitError), so a
// child never returns into the caller's stack or runs its destructors: any
// object the parent owns (a store server, its threads) is left alone.
// A child dies with the parent (PR_SET_PDEATHSIG), so no rank is orphaned.
inline std::vector<pid_t> fork_ranks(int nproc, const std::function<int(int rank)>& body) {
  std::vector<pid_t> pids;
  std::fflush(nullptr);  // or buffered output would be printed by every child too
  const pid_t parent = getpid();
  for (int rank = 0; rank < nproc; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      for (pid_t started : pids) kill(started, SIGKILL);
      throw std::runtime_error("fork failed for rank " + std::to_string(rank));
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int code = kExitError;
      if (getppid() == parent) {
        try {
          code = body(rank);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "[rank %d] error: %s\n", rank, e.what());
        } catch (...) {
          std::fprintf(stderr, "[rank %d] unknown error\n", rank);
        }
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  return pids;
}

inline std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  int code = WEXITSTATUS(status);
  if (code == kExitWrongResults) return "found wrong results in its output";
  if (code == kExitError) return "failed (its error is above)";
  return "exited with code " + std::to_string(code);
}

// Waits for every rank. When one fails, the others get `grace_seconds` to
// finish or fail on their own (their own errors say more), then are killed.
// After `run_timeout_seconds` (0: none) all remaining ranks are killed.
// Returns true when every rank exited with kExitOk; names each failure on
// stderr, the first one first.
inline bool wait_ranks(const std::vector<pid_t>& pids, double grace_seconds,
                       double run_timeout_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::vector<bool> running(pids.size(), true);
  size_t left = pids.size();
  bool all_ok = true;
  auto kill_deadline = Clock::time_point::max();
  std::string kill_reason;
  if (run_timeout_seconds > 0) {
    kill_deadline = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(run_timeout_seconds));
    kill_reason = "the run timeout";
  }
  while (left > 0) {
    bool reaped = false;
    for (size_t rank = 0; rank < pids.size(); ++rank) {
      if (!running[rank]) continue;
      int status = 0;
      pid_t done = waitpid(pids[rank], &status, WNOHANG);
      if (done == 0) continue;
      running[rank] = false;
      --left;
      reaped = true;
      if (done < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != kExitOk) {
        std::fprintf(stderr, "launcher: rank %zu %s\n", rank,
                     done < 0 ? "could not be waited for" : describe_exit(status).c_str());
        if (all_ok) {
          auto grace = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(grace_seconds));
          if (grace < kill_deadline) {
            kill_deadline = grace;
            kill_reason = "rank " + std::to_string(rank) + " failed";
          }
        }
        all_ok = false;
      }
    }
    if (left == 0) break;
    if (Clock::now() >= kill_deadline) {
      for (size_t rank = 0; rank < pids.size(); ++rank) {
        if (!running[rank]) continue;
        std::fprintf(stderr, "launcher: killing rank %zu after %s\n", rank, kill_reason.c_str());
        kill(pids[rank], SIGKILL);
        waitpid(pids[rank], nullptr, 0);
        running[rank] = false;
      }
      return false;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return all_ok;
}

}  // namespace giant::bench
