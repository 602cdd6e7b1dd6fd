// giant_config_fuzz [--iterations N] [--seconds S] [--seed S] [--target
// run_config|cluster|model]: feeds mutated
// TOML to the parsers of what users write by hand: giant train's config
// file (every key checked, then the keys together), and the planner's
// cluster and model files. Each input must either be accepted or be a
// ConfigError naming what is wrong; anything else (another exception, a
// crash, a hang) is a failure, reported with the input in hex. What a run
// config accepts must also write back (run_config_toml) to a file that
// reads again to the same text.
//
// The command line and output are bench/fuzz's (fuzz_driver.h).

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/tunables.h"
#include "giant/planner/spec_toml.h"
#include "giant/train/run_config.h"
#include "fuzz_driver.h"

namespace giant::train::fuzz {
namespace {

namespace fs = std::filesystem;
using giant::fuzz::Inconsistent;
using giant::fuzz::read_file;
using giant::fuzz::Target;
using giant::fuzz::Verdict;

std::vector<std::string> files_in(const std::string& folder) {
  std::vector<std::string> texts;
  for (const auto& entry : fs::directory_iterator(fs::path(GIANT_SOURCE_DIR) / folder)) {
    if (entry.path().extension() == ".toml") texts.push_back(read_file(entry.path()));
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

// A parser that throws ConfigError for bad input, as a fuzz target.
Target target_of(std::string name, std::vector<std::string> seeds, std::function<void(const std::string&)> parse) {
  return {std::move(name), std::move(seeds), [parse](const std::string& input) {
            try {
              parse(input);
              return Verdict::accepted;
            } catch (const ConfigError&) {
              return Verdict::refused;  // the expected answer to a bad input
            }
          }};
}

std::vector<Target> targets() {
  auto folder = std::make_shared<giant::fuzz::TempFolder>("giant-config-fuzz");
  const RunConfigTarget run_config{folder->path() / "config.toml"};
  return {target_of("run_config", run_config_seeds(), [folder, run_config](const std::string& t) { run_config(t); }),
          target_of("cluster", files_in("examples/clusters"), [](const std::string& t) { planner::parse_cluster_toml(t); }),
          target_of("model", files_in("examples/models"), [](const std::string& t) { planner::parse_model_toml(t); })};
}

}  // namespace
}  // namespace giant::train::fuzz

int main(int argc, char** argv) {
  return giant::fuzz::fuzz_main(argc, argv,
                                "Fuzzes the parsers of giant train's config and the planner's cluster and model files.",
                                "giant_config_fuzz", giant::train::fuzz::targets);
}
