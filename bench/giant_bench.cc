// giant-bench: the benchmarks' program, what `giant bench` runs (the giant
// command links no benchmark code; it runs this program from beside itself).
//
//   giant-bench [--log-level LEVEL] [--log-timestamps] ccl|pipeline [flags]
//
// The work is in bench/ccl and bench/pipeline; messages name the command as
// users type it, `giant bench`.
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ccl_bench.h"
#include "cli_support.h"
#include "giant/base/edit_distance.h"
#include "giant/ccl/bootstrap.h"
#include "pipeline_bench.h"

namespace giant::app {
namespace {

constexpr const char* kBenchUsage =
    "usage: giant bench ccl|pipeline [flags]   (giant bench NAME --help lists its flags)\n";

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

int bench_pipeline(const std::vector<std::string>& args) {
  CLI::App cli("", "giant bench pipeline");
  bench::pipeline::OptionFlags flags;
  GlobalFlags global;
  bench::pipeline::add_options(cli, flags);
  add_global_flags(cli, global);
  if (const auto code = parse_command_line(cli, args)) return *code;
  bench::pipeline::Options options;
  try {
    apply_global_flags(global);
    options = bench::pipeline::options_from(flags);
  } catch (const std::exception& e) {
    report_failure("giant bench pipeline", e);
    return kExitBadInput;
  }
  try {
    return bench::pipeline::run_pipeline_bench(options);
  } catch (const std::exception& e) {
    return report_failure("giant bench pipeline", e);  // a ConfigError (the world size, the environment) is bad input
  }
}

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
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (what == "ccl") return bench_ccl(rest);
  if (what == "pipeline") return bench_pipeline(rest);
  std::cerr << "giant bench: unknown benchmark '" << what << "'" << did_you_mean(what, {"ccl", "pipeline"})
            << " (known: ccl, pipeline)\n";
  return kExitBadInput;
}

// The global flags before the benchmark's name (as `giant` passes on those
// given before `bench`), then the benchmark.
int run(int argc, char** argv) {
  CLI::App cli("", "giant bench");
  cli.set_help_flag();  // --help before a name goes to bench_command, which prints the usage
  GlobalFlags global;
  add_global_flags(cli, global);
  cli.prefix_command();
  if (const auto code = parse_command_line(cli, std::vector<std::string>(argv + 1, argv + argc))) return *code;
  try {
    configure_logging(global, ccl::Environment::from_process().vars());
  } catch (const std::exception& e) {
    return report_failure("giant bench", e);
  }
  return bench_command(cli.remaining());
}

}  // namespace
}  // namespace giant::app

int main(int argc, char** argv) { return giant::app::run(argc, argv); }
