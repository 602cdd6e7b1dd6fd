// giant: train, benchmark and plan GPT training runs.
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/edit_distance.h"
#include "giant/ccl/bootstrap.h"

#ifndef GIANT_VERSION
#error "GIANT_VERSION comes from CMake's project() version (apps/giant/CMakeLists.txt)"
#endif

namespace giant::app {
namespace {

constexpr const char* kCommands =
    "commands:\n"
    "  train [CONFIG.toml] [--set key=value ...]   train a GPT (giant train --help)\n"
    "  launch --nproc N [--hosts SPEC] -- COMMAND... run and supervise N ranks (giant launch --help)\n"
    "  bench ccl [flags]                           benchmark ccl's collectives (giant bench ccl --help)\n"
    "  bench pipeline [flags]                      pipeline schedules with sleeping stages against the simulator\n"
    "                                              (under giant launch; giant bench pipeline --help)\n"
    "  plan [flags]                                choose a parallel layout (giant plan --help)\n"
    "  generate CHECKPOINT [flags]                 generate text from a checkpoint (giant generate --help)\n"
    "  checkpoint {info, verify, export, import}   inspect, check and convert checkpoints\n"
    "                                              (giant checkpoint --help)\n"
    "  data {prepare, train-tokenizer}             tokenize a corpus to .bin/.idx, learn a BPE\n"
    "                                              (giant data --help)\n"
    "\n"
    "--log-level and --log-timestamps go before the command or after its name.\n"
    "Exit status: 0 done, 1 a runtime failure, 2 bad flags, config or environment.";

int dispatch(const std::string& command, const std::vector<std::string>& args, const GlobalFlags& global) {
  if (command == "train") return train_command(args);
  if (command == "launch") return launch_command(args);
  if (command == "bench") return bench_command(args, global);
  if (command == "plan") return plan_command(args);
  if (command == "generate") return generate_command(args);
  if (command == "checkpoint") return checkpoint_command(args);
  if (command == "data") return data_command(args);
  const bool flag = command.rfind('-', 0) == 0;  // prefix_command leaves unknown flags here too
  std::cerr << "giant: unknown " << (flag ? "flag" : "command") << " '" << command << "'"
            << did_you_mean(command, flag ? std::vector<std::string>{"--version", "--log-level", "--log-timestamps"}
                                          : std::vector<std::string>{"train", "launch", "bench", "plan", "generate", "checkpoint", "data"})
            << "\n(see giant --help)\n";
  return kExitBadInput;
}

int run(int argc, char** argv) {
  CLI::App cli("giant [--version] [--log-level LEVEL] [--log-timestamps] <command> [args]:\n"
               "train, benchmark and plan GPT training runs.",
               "giant");
  cli.set_version_flag("--version", std::string("giant ") + GIANT_VERSION, "print the version and exit");
  GlobalFlags global;
  add_global_flags(cli, global);
  cli.prefix_command();  // the first word that is no flag of ours is the command; the rest is its own
  cli.footer(kCommands);
  if (const auto code = parse_command_line(cli, std::vector<std::string>(argv + 1, argv + argc))) return *code;
  std::vector<std::string> rest = cli.remaining();
  if (rest.empty()) {
    std::cerr << cli.help();
    return kExitBadInput;
  }
  const std::string command = rest.front();
  rest.erase(rest.begin());
  if (command == "help") {
    std::cout << cli.help();
    return kExitOk;
  }
  try {
    configure_logging(global, ccl::Environment::from_process().vars());
  } catch (const std::exception& e) {
    return report_failure("giant", e);
  }
  return dispatch(command, rest, global);
}

}  // namespace
}  // namespace giant::app

int main(int argc, char** argv) { return giant::app::run(argc, argv); }
