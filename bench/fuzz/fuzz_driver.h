// The loop every fuzzer runs: mutate an input drawn from a pool (the seeds
// and the mutants that were accepted), feed it to the target, and judge the
// answer. A target answers `accepted` or `refused` (the error it owes a bad
// input, caught by the target itself); anything it throws, and any input
// that takes more than a second of CPU (the process's, every thread's, so
// that other jobs on the machine do not count), is a failure, printed with
// the input in hex. A watchdog thread ends the process (exit 1, the input
// printed) when one input runs 10 s of wall time, so that a hang cannot
// pass as a slow run.
//
// The command line (fuzz_main): --iterations N (per target, default
// 100000), --seconds S (per target, stops earlier; 0: no limit) or
// --total-seconds T (shared evenly by the targets), --seed S, --target NAME
// (only that one). Prints one line per target:
//   fuzz target=NAME iterations=N failures=F seconds=S accepted=K
// and, on stderr, how far a target is every minute.
// Exit status: 0 no failure, 1 a failure, 2 bad flags.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "mutator.h"

namespace giant::fuzz {

enum class Verdict { accepted, refused };

// What a target throws for an input it accepted but got wrong.
class Inconsistent : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Target {
  using Feed = std::function<Verdict(const std::string& input)>;
  Target(std::string name, std::vector<std::string> seeds, Feed feed)
      : name(std::move(name)), seeds(std::move(seeds)), feed(std::move(feed)) {}

  std::string name;
  std::vector<std::string> seeds;
  Feed feed;
  // How a new input is made from a pool member; default: Mutator::mutate
  // with the seeds to splice from.
  std::function<std::string(Mutator&, const std::string& parent, const std::vector<std::string>& seeds)> mutate;
  // Accepted mutants longer than this stay out of the pool, so that
  // duplications cannot compound into ever larger, slower inputs.
  size_t max_pool_input = 8192;
  // At most this many inputs whatever the budget asks (0: no cap), for a
  // target that takes milliseconds an input.
  int64_t max_iterations = 0;
};

struct Budget {
  int64_t iterations = 100000;
  double seconds = 0;  // 0: no time limit
  uint64_t seed = 1;
  double max_input_seconds = 1;  // of CPU
};

// A file's bytes ("" when it cannot be read): the seeds fuzzers start from.
std::string read_file(const std::filesystem::path& path);

// A folder of a fuzzer's own under the system's temporary folder, removed
// with everything in it when the fuzzer ends.
class TempFolder {
 public:
  explicit TempFolder(const std::string& name);
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs one target; its failures (0, or 1: it stops at the first).
int run_target(const Target& target, const Budget& budget);

// The command line above over `targets`, built once the flags are read
// (a target may need setup, such as a model file, that a --help skips).
int fuzz_main(int argc, char** argv, const std::string& description, const std::string& program,
              const std::function<std::vector<Target>()>& targets);

}  // namespace giant::fuzz
