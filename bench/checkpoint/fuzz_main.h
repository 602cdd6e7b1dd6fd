// The command line of a one-target fuzzer: --iterations N (default 100000)
// and --seed S (default 1), then `run(iterations, seed)`, which returns its
// failures. Exit status: 0 none, 1 a failure, 2 bad flags.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace giant::checkpoint::fuzz {

inline int fuzz_main(int argc, char** argv, const std::string& description, const std::string& name,
                     const std::function<int(int64_t iterations, uint64_t seed)>& run) {
  CLI::App cli(description, name);
  int64_t iterations = 100000;
  uint64_t seed = 1;
  cli.add_option("--iterations", iterations, "mutated inputs")->check(CLI::PositiveNumber);
  cli.add_option("--seed", seed, "the mutations' random seed");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = cli.exit(e);
    return code == 0 ? 0 : 2;
  }
  return run(iterations, seed) == 0 ? 0 : 1;
}

}  // namespace giant::checkpoint::fuzz
