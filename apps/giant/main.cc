// giant: train, benchmark and plan GPT training runs.
#include <cstdio>
#include <string>
#include <vector>

#include "ccl_bench.h"
#include "commands.h"

namespace {

constexpr const char* kUsage =
    "usage: giant <command> [args]\n"
    "\n"
    "commands:\n"
    "  train [CONFIG.toml] [--set key=value ...]   train a GPT (giant train --help)\n"
    "  launch --nproc N [--hosts SPEC] -- COMMAND... run and supervise N ranks (giant launch --help)\n"
    "  bench ccl [flags]                           benchmark ccl's collectives (giant bench ccl --help)\n"
    "  plan [flags]                                choose a parallel layout (giant plan --help)\n";

int bench(int argc, char** argv) {
  if (argc < 3 || std::string(argv[2]) == "--help" || std::string(argv[2]) == "-h") {
    std::fputs("usage: giant bench ccl [flags]   (giant bench ccl --help lists them)\n", argc < 3 ? stderr : stdout);
    return argc < 3 ? 2 : 0;
  }
  const std::string what = argv[2];
  if (what == "ccl") {
    return giant::bench::run_ccl_bench(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "giant bench: unknown benchmark '%s' (known: ccl)\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  if (command == "train") return giant::app::train_command(rest);
  if (command == "launch") return giant::app::launch_command(rest);
  if (command == "bench") return bench(argc, argv);
  if (command == "plan") return giant::app::plan_command(rest);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "giant: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}
