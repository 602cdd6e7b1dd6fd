// `giant launch [flags] -- COMMAND [ARGS...]`: the command line of the
// launcher in src/giant/launch (which does the work).
#include <charconv>
#include <iostream>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/units.h"
#include "giant/ccl/bootstrap.h"
#include "giant/launch/host_spec.h"
#include "giant/launch/launcher.h"

namespace giant::app {
namespace {

constexpr const char* kUsageLine =
    "usage: giant launch --nproc N [--hosts SPEC] [--store-addr HOST[:PORT]] [--timeout-grace SECONDS] "
    "[--] COMMAND [ARGS...]\n";

constexpr const char* kHelp =
    "\n"
    "Runs N ranks of COMMAND on this machine, serves the store they meet at, and\n"
    "supervises them: each line they print is prefixed with \"[rank R] \"; SIGINT,\n"
    "SIGTERM and SIGHUP are passed on to every rank; when a rank fails the others\n"
    "are stopped and the exit status is the failed rank's (128 + signal if killed).\n"
    "\n"
    "  --nproc N               ranks to run (may be omitted with --hosts)\n"
    "  --hosts SPEC            HOST:SLOTS,... with HOST `local` or `netns:NAME` (a network\n"
    "                          namespace, entered with `ip netns exec NAME`); ranks are\n"
    "                          numbered host by host and each host gets its own GIANT_HOST_ID\n"
    "  --store-addr HOST[:PORT] the address ranks reach the store at (it then listens on\n"
    "                          0.0.0.0); needed with netns hosts. Default 127.0.0.1\n"
    "  --timeout-grace S       time between SIGTERM and SIGKILL when stopping ranks (5s)\n"
    "\n"
    "Ranks get GIANT_RANK, GIANT_WORLD_SIZE, GIANT_LOCAL_RANK, GIANT_LOCAL_WORLD_SIZE,\n"
    "GIANT_STORE_ADDR and GIANT_SECRET_FILE (see README, Bootstrap).\n"
    "Exit status: 0 when every rank exits 0; else the first failed rank's; 128 + signal\n"
    "when the launch was stopped by a signal; 2 for bad usage.\n";

struct UsageError {
  std::string message;
};

int parse_count(const std::string& flag, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [parsed_to, err] = std::from_chars(text.data(), end, value);
  if (text.empty() || err != std::errc() || parsed_to != end) {
    throw UsageError{flag + " expects an integer, got '" + text + "'"};
  }
  if (value < 1) throw UsageError{flag + " must be at least 1, got " + text};
  return value;
}

// Fills options from args; returns false for --help.
bool parse_args(const std::vector<std::string>& args, launch::LaunchOptions* options) {
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") return false;
    if (arg.size() < 2 || arg[0] != '-') break;  // the command starts here
    std::string flag = arg;
    std::string value;
    bool has_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    auto take_value = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw UsageError{flag + " needs a value"};
      return args[++i];
    };
    if (flag == "--nproc") {
      options->nproc = parse_count(flag, take_value());
    } else if (flag == "--hosts") {
      options->hosts = launch::parse_host_spec(take_value());
    } else if (flag == "--store-addr") {
      options->store_address = take_value();
    } else if (flag == "--timeout-grace") {
      std::string text = take_value();
      try {
        options->grace_seconds = parse_seconds(text);
      } catch (const Error& e) {
        throw UsageError{"--timeout-grace expects a duration (5, 5s, 500ms), got '" + text + "'"};
      }
    } else {
      throw UsageError{"unknown flag '" + arg + "'"};
    }
  }
  options->command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (options->command.empty()) throw UsageError{"no command to run"};
  if (options->nproc == 0 && options->hosts.empty()) throw UsageError{"--nproc N (or --hosts SPEC) is required"};
  return true;
}

int usage_error(const std::string& message) {
  std::cerr << "giant launch: " + message + "\n" + kUsageLine + "(giant launch --help explains the flags)\n"
            << std::flush;
  return 2;
}

}  // namespace

int launch_command(const std::vector<std::string>& args) {
  launch::LaunchOptions options;
  try {
    if (!parse_args(args, &options)) {
      std::cout << kUsageLine << kHelp << std::flush;
      return 0;
    }
  } catch (const UsageError& e) {
    return usage_error(e.message);
  } catch (const ConfigError& e) {  // --hosts
    return usage_error(e.what());
  }
  options.environment = ccl::Environment::from_process();
  try {
    return launch::run_launch(options, std::cerr);
  } catch (const ConfigError& e) {  // checked before any rank starts
    return usage_error(e.what());
  } catch (const std::exception& e) {
    std::cerr << std::string("giant launch: ") + e.what() + "\n" << std::flush;
    return 1;
  }
}

}  // namespace giant::app
