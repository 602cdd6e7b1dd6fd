#include "fuzz_driver.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <typeinfo>

#include <stdlib.h>

#include <CLI/CLI.hpp>

#include "giant/base/timer.h"

namespace giant::fuzz {
namespace {

constexpr size_t kPoolSize = 256;
// How often a long run says how far it is (on stderr).
constexpr double kProgressSeconds = 60;

void report_failure(const std::string& target, const std::string& input, const std::string& why) {
  std::cerr << "fuzz target=" << target << ": " << why << "\ninput (" << input.size() << " bytes):\n"
            << hex_dump(input) << std::endl;
}

// Ends the process when one input runs past `limit`: a hang reports itself
// instead of holding the run until an outer timeout kills it unexplained.
class HangWatchdog {
 public:
  HangWatchdog(std::string target, double limit_seconds)
      : target_(std::move(target)), limit_(limit_seconds), thread_([this] { watch(); }) {}
  ~HangWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void begin(const std::string& input) {
    std::lock_guard<std::mutex> lock(mutex_);
    input_ = input;
    clock_.reset();
    busy_ = true;
  }
  void end() {
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      if (busy_ && clock_.seconds() > limit_) {
        report_failure(target_, input_, "an input hung (over " + std::to_string(limit_) + " s)");
        std::fflush(nullptr);
        std::_Exit(1);
      }
    }
  }

  std::string target_;
  double limit_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string input_;
  Stopwatch clock_;
  bool busy_ = false;
  bool done_ = false;
  std::thread thread_;
};

// The process's CPU seconds so far (every thread's): an input's cost that
// other jobs on the machine do not inflate, as they do its wall time.
double cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Feeds one input; an empty string when it passed, else why it failed.
std::string judge(const Target& target, const std::string& input, double max_seconds, Verdict* verdict) {
  const double cpu_before = cpu_seconds();
  try {
    *verdict = target.feed(input);
  } catch (const Inconsistent& e) {
    return std::string("accepted but inconsistent: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("an unexpected exception (") + typeid(e).name() + "): " + e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
  const double seconds = cpu_seconds() - cpu_before;
  if (seconds > max_seconds) return "one input took " + std::to_string(seconds) + " s of CPU";
  return "";
}

}  // namespace

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TempFolder::TempFolder(const std::string& name) {
  std::string pattern = (std::filesystem::temp_directory_path() / (name + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot make a folder like " + pattern);
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

int run_target(const Target& target, const Budget& budget) {
  Mutator mutator(budget.seed ^ std::hash<std::string>{}(target.name));
  std::vector<std::string> pool = target.seeds;
  const size_t seeds = pool.size();
  HangWatchdog watchdog(target.name, std::max(10.0, 10 * budget.max_input_seconds));
  const Stopwatch clock;
  int64_t done = 0, accepted = 0;
  int failures = 0;
  const int64_t iterations =
      target.max_iterations > 0 ? std::min(budget.iterations, target.max_iterations) : budget.iterations;
  double next_progress = kProgressSeconds;
  for (; done < iterations && failures == 0; ++done) {
    if (budget.seconds > 0 && clock.seconds() > budget.seconds) break;
    if ((done & 255) == 0 && clock.seconds() > next_progress) {
      std::cerr << "fuzz target=" << target.name << ": " << done << " of " << iterations << " inputs in "
                << static_cast<int64_t>(clock.seconds()) << " s" << std::endl;
      next_progress += kProgressSeconds;
    }
    const std::string& parent = pool[mutator.below(pool.size())];
    std::string input = target.mutate ? target.mutate(mutator, parent, target.seeds)
                                      : mutator.mutate(parent, target.seeds);
    Verdict verdict = Verdict::refused;
    watchdog.begin(input);
    const std::string failure = judge(target, input, budget.max_input_seconds, &verdict);
    watchdog.end();
    if (!failure.empty()) {
      report_failure(target.name, input, failure);
      ++failures;
      continue;
    }
    if (verdict != Verdict::accepted) continue;
    ++accepted;
    if (input.size() > target.max_pool_input) continue;
    if (pool.size() < kPoolSize) {
      pool.push_back(std::move(input));
    } else {
      pool[seeds + mutator.below(kPoolSize - seeds)] = std::move(input);
    }
  }
  std::cout << "fuzz target=" << target.name << " iterations=" << done << " failures=" << failures
            << " seconds=" << clock.seconds() << " accepted=" << accepted << std::endl;
  return failures;
}

int fuzz_main(int argc, char** argv, const std::string& description, const std::string& program,
              const std::function<std::vector<Target>()>& targets) {
  CLI::App cli(description + "\n\nExit status: 0 no failure, 1 a failure, 2 bad flags.", program);
  Budget budget;
  std::string only;
  cli.add_option("--iterations", budget.iterations, "mutated inputs per target")->check(CLI::PositiveNumber);
  cli.add_option("--seconds", budget.seconds, "stop each target after this long (0: no limit)")
      ->check(CLI::NonNegativeNumber);
  double total_seconds = 0;
  cli.add_option("--total-seconds", total_seconds, "stop after this long in all, shared evenly by the targets")
      ->check(CLI::NonNegativeNumber)
      ->excludes("--seconds");
  cli.add_option("--seed", budget.seed, "the mutations' random seed");
  cli.add_option("--target", only, "only this target");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = cli.exit(e);
    return code == 0 ? 0 : 2;
  }
  const std::vector<Target> all = targets();
  if (total_seconds > 0) budget.seconds = total_seconds / static_cast<double>(only.empty() ? all.size() : 1);
  std::string names;
  int failures = 0;
  bool known = only.empty();
  for (const Target& target : all) {
    names += (names.empty() ? "" : ", ") + target.name;
    if (!only.empty() && target.name != only) continue;
    known = true;
    failures += run_target(target, budget);
  }
  if (!known) {
    std::cerr << program << ": no target '" << only << "' (" << names << ")" << std::endl;
    return 2;
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace giant::fuzz

// The fuzzers' AddressSanitizer defaults (the environment's ASAN_OPTIONS
// still override them): an allocation over 256 MiB, or one the host cannot
// make, reaches the code as a failed allocation (std::bad_alloc, or null
// from new (std::nothrow)) instead of ending the process, so that a size
// taken from an input unchecked is reported as that input's failure.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1";
}

// UndefinedBehaviorSanitizer's: a report ends the run (a failure), with its stack.
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1:halt_on_error=1"; }
