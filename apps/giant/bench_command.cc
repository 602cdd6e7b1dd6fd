// giant bench ccl [flags]: the benchmarks' command line; the work is in
// bench/ccl.
#include <iostream>

#include <CLI/CLI.hpp>

#include "ccl_bench.h"
#include "cli_support.h"
#include "commands.h"
#include "giant/base/edit_distance.h"

namespace giant::app {
namespace {

constexpr const char* kBenchUsage = "usage: giant bench ccl [flags]   (giant bench ccl --help lists them)\n";

int bench_ccl(const std::vector<std::string>& args) {
  CLI::App cli("", "giant bench ccl");
  bench::OptionFlags flags;
  GlobalFlags global;
  bench::add_options(cli, flags);
  add_global_flags(cli, global);
  if (const auto code = parse_command_line(cli, args)) return *code;
  bench::Options options;
  try {
    apply_global_flags(global);
    options = bench::options_from(flags);
  } catch (const std::exception& e) {
    report_failure("giant bench ccl", e);
    return kExitBadInput;
  }
  try {
    return bench::run_ccl_bench(options);
  } catch (const std::exception& e) {
    return report_failure("giant bench ccl", e);
  }
}

}  // namespace

int bench_command(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << kBenchUsage;
    return kExitBadInput;
  }
  const std::string& what = args.front();
  if (what == "--help" || what == "-h") {
    std::cout << kBenchUsage;
    return kExitOk;
  }
  if (what == "ccl") return bench_ccl(std::vector<std::string>(args.begin() + 1, args.end()));
  std::cerr << "giant bench: unknown benchmark '" << what << "'" << did_you_mean(what, {"ccl"}) << " (known: ccl)\n";
  return kExitBadInput;
}

}  // namespace giant::app
