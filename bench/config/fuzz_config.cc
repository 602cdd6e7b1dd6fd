// giant_config_fuzz --iterations N --seed S [--target NAME]: feeds mutated
// TOML to the parsers of what users write by hand: giant train's config
// file (every key checked, then the keys together), and the planner's
// cluster and model files. Each input must either be accepted or be a
// ConfigError naming what is wrong; anything else (another exception, a
// crash, a hang) is a failure, reported with the input in hex. What a run
// config accepts must also write back (run_config_toml) to a file that
// reads again to the same text.
//
// Prints one line per target (accepted: the inputs that parsed):
//   fuzz target=NAME iterations=N failures=F seconds=S accepted=K
// and exits 1 on the first failure, 2 on bad flags.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include <CLI/CLI.hpp>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/base/tunables.h"
#include "giant/planner/spec_toml.h"
#include "giant/train/run_config.h"
#include "mutator.h"

namespace giant::train::fuzz {
namespace {

namespace fs = std::filesystem;
using checkpoint::fuzz::hex_dump;
using checkpoint::fuzz::Mutator;

// A violated expectation about something that was accepted.
class Inconsistent : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> files_in(const std::string& folder) {
  std::vector<std::string> texts;
  for (const auto& entry : fs::directory_iterator(fs::path(GIANT_SOURCE_DIR) / folder)) {
    if (entry.path().extension() == ".toml") texts.push_back(read_text(entry.path()));
  }
  return texts;
}

std::vector<std::string> run_config_seeds() {
  std::vector<std::string> seeds = files_in("examples/configs");
  Tunables defaults;
  define_run_keys(defaults);
  seeds.push_back(run_config_toml(defaults));  // as giant train writes out_dir/config.toml
  return seeds;
}

// giant train's reading of a config file: every key, then the keys together.
struct RunConfigTarget {
  fs::path file;

  void operator()(const std::string& text) const {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    Tunables keys;
    define_run_keys(keys);
    apply_config_file(keys, file.string());
    run_config_from(keys);
    // Accepted: what it writes back reads again to the same text.
    const std::string written = run_config_toml(keys);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << written;
    Tunables again;
    define_run_keys(again);
    apply_config_file(again, file.string());
    if (run_config_toml(again) != written) throw Inconsistent("the config written back reads back differently");
  }
};

struct Target {
  std::string name;
  std::vector<std::string> seeds;
  std::function<void(const std::string&)> parse;  // throws ConfigError for bad input
};

void report_failure(const std::string& target, const std::string& input, const std::string& why) {
  std::cerr << "fuzz target=" << target << ": " << why << "\ninput (" << input.size() << " bytes):\n"
            << hex_dump(input) << std::endl;
}

int run_target(const Target& target, int64_t iterations, uint64_t seed) {
  Mutator random(seed);
  std::vector<std::string> pool = target.seeds;  // seeds and accepted mutants: later mutations build on them
  const size_t seeds = pool.size();
  constexpr size_t kPoolSize = 256, kMaxPoolInput = 8192;
  const Stopwatch clock;
  int64_t done = 0, accepted = 0;
  int failures = 0;
  for (; done < iterations && failures == 0; ++done) {
    const std::string input = random.mutate(pool[random.below(pool.size())], target.seeds);
    try {
      try {
        target.parse(input);
      } catch (const ConfigError&) {
        continue;  // the expected answer to a bad input
      }
      ++accepted;
      if (input.size() > kMaxPoolInput) continue;
      if (pool.size() < kPoolSize) {
        pool.push_back(input);
      } else {
        pool[seeds + random.below(kPoolSize - seeds)] = input;
      }
    } catch (const Inconsistent& e) {
      report_failure(target.name, input, std::string("accepted but inconsistent: ") + e.what());
      ++failures;
    } catch (const std::exception& e) {
      report_failure(target.name, input, std::string("not a ConfigError (") + typeid(e).name() + "): " + e.what());
      ++failures;
    }
  }
  std::cout << "fuzz target=" << target.name << " iterations=" << done << " failures=" << failures
            << " seconds=" << clock.seconds() << " accepted=" << accepted << std::endl;
  return failures;
}

int run(int64_t iterations, uint64_t seed, const std::string& only) {
  std::string pattern = (fs::temp_directory_path() / "giant-config-fuzz-XXXXXX").string();
  const fs::path folder = ::mkdtemp(pattern.data());
  const std::vector<Target> targets = {
      {"run_config", run_config_seeds(), RunConfigTarget{folder / "config.toml"}},
      {"cluster", files_in("examples/clusters"), [](const std::string& t) { planner::parse_cluster_toml(t); }},
      {"model", files_in("examples/models"), [](const std::string& t) { planner::parse_model_toml(t); }}};
  int failures = 0;
  bool known = only.empty();
  for (const Target& target : targets) {
    if (!only.empty() && target.name != only) continue;
    known = true;
    failures += run_target(target, iterations, seed);
  }
  std::error_code ignored;
  fs::remove_all(folder, ignored);
  if (!known) {
    std::cerr << "giant_config_fuzz: no target '" << only << "' (run_config, cluster, model)" << std::endl;
    return -1;
  }
  return failures;
}

}  // namespace
}  // namespace giant::train::fuzz

int main(int argc, char** argv) {
  CLI::App cli("Fuzzes the parsers of giant train's config and the planner's cluster and model files.",
               "giant_config_fuzz");
  int64_t iterations = 100000;
  uint64_t seed = 1;
  std::string target;
  cli.add_option("--iterations", iterations, "mutated inputs per target")->check(CLI::PositiveNumber);
  cli.add_option("--seed", seed, "the mutations' random seed");
  cli.add_option("--target", target, "only this target: run_config, cluster or model");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = cli.exit(e);
    return code == 0 ? 0 : 2;
  }
  const int failures = giant::train::fuzz::run(iterations, seed, target);
  return failures == 0 ? 0 : failures < 0 ? 2 : 1;
}
