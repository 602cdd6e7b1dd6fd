// `giant launch [flags] [--] COMMAND [ARGS...]`: the command line of the
// launcher in src/giant/launch (which does the work).
#include <charconv>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_support.h"
#include "giant/base/error.h"
#include "giant/base/units.h"
#include "giant/ccl/bootstrap.h"
#include "giant/launch/emulated_cluster.h"
#include "giant/launch/host_spec.h"
#include "giant/launch/launcher.h"

namespace giant::app {
namespace {

constexpr const char* kUsageLine =
    "usage: giant launch --nproc N [--hosts SPEC] [--emulate HxR [--link-rate RATE]] [--store-addr HOST[:PORT]] "
    "[--timeout-grace SECONDS] [--max-restarts N [--restart-backoff SECONDS]] [--] COMMAND [ARGS...]\n";

constexpr const char* kDescription =
    "Runs N ranks of COMMAND on this machine, serves the store they meet at, and\n"
    "supervises them: each line they print is prefixed with \"[rank R] \"; SIGINT,\n"
    "SIGTERM and SIGHUP are passed on to every rank and the launcher waits for them\n"
    "(a second signal kills them); when a rank fails the others are stopped. If the\n"
    "launcher itself is killed, its ranks are killed too. --max-restarts N starts\n"
    "every rank again after a failure, up to N times, resuming from the latest\n"
    "checkpoint (GIANT_TRAIN_RESUME=auto), unless the failure came back the same\n"
    "way at the same step (rank 0 writes each step it begins to\n"
    "GIANT_TRAIN_PROGRESS_FILE).\n"
    "--emulate HxR (root) runs the ranks on H emulated hosts of R ranks each:\n"
    "network namespaces joined by a bridge, each host's link capped at --link-rate\n"
    "in both directions (tc tbf), all removed when the launch ends.\n"
    "The command starts at `--` or at the first argument that is not a flag.\n";

constexpr const char* kFooter =
    "Ranks are numbered host by host; each host of --hosts gets its own GIANT_HOST_ID.\n"
    "Ranks get GIANT_RANK, GIANT_WORLD_SIZE, GIANT_LOCAL_RANK, GIANT_LOCAL_WORLD_SIZE,\n"
    "GIANT_STORE_ADDR and GIANT_SECRET_FILE (see docs/ccl.md, Bootstrap).\n"
    "Exit status: 0 when every rank exits 0 (with --max-restarts, of the last attempt);\n"
    "else the first failed rank's (128 + signal if it was killed); 128 + signal when\n"
    "the launch was stopped by a signal; 1 when the launcher itself fails; 2 for bad usage.";

// CLI11 cannot know that the arguments it leaves over are the command.
class LaunchHelp : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string usage = CLI::Formatter::make_usage(app, std::move(name));
    usage.insert(usage.find_last_not_of('\n') + 1, " [--] COMMAND [ARGS...]");
    return usage;
  }
};

struct UsageError {
  std::string message;
};

// --emulate and --link-rate as given, turned into LaunchOptions::emulate
// once both are read.
struct EmulateFlags {
  std::string cluster;
  std::string link_rate;
};

// "" when text is a whole number of at least `least`, else why not.
std::string check_whole_number(const std::string& text, int least) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [parsed_to, err] = std::from_chars(text.data(), end, value);
  if (text.empty() || err != std::errc() || parsed_to != end) return "expects an integer, got '" + text + "'";
  if (value >= least) return "";
  const std::string bound = least == 0 ? "must be 0 or more" : "must be at least " + std::to_string(least);
  return bound + ", got " + text;
}

CLI::Validator whole_number_of_at_least(int least) {
  return CLI::Validator([least](const std::string& text) { return check_whole_number(text, least); }, "");
}

std::string check_duration(const std::string& text) {
  try {
    parse_seconds(text);
    return "";
  } catch (const Error&) {
    return "expects a duration (5, 5s, 500ms), got '" + text + "'";
  }
}

// The flags on cli, filling options. prefix_command: CLI11 stops at the
// first argument that is no flag of ours and leaves it and the rest (the
// command and its own flags) in remaining(); the flags keep the last value
// given, as they always have.
void add_flags(CLI::App& cli, launch::LaunchOptions& options, EmulateFlags& emulate) {
  cli.prefix_command();
  cli.formatter(std::make_shared<LaunchHelp>());
  cli.footer(kFooter);
  cli.add_option("--nproc", options.nproc, "ranks to run (may be omitted with --hosts)")
      ->type_name("N")
      ->check(whole_number_of_at_least(1))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cli.add_option_function<std::string>(
         "--hosts", [&options](const std::string& spec) { options.hosts = launch::parse_host_spec(spec); },
         "HOST:SLOTS,... with HOST `local` or `netns:NAME` (entered with `ip netns exec NAME`)")
      ->type_name("SPEC")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cli.add_option("--emulate", emulate.cluster,
                 "run on H emulated hosts of R ranks (network namespaces; needs root), removed at the end")
      ->type_name("HxR")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cli.add_option("--link-rate", emulate.link_rate,
                 "with --emulate: each host's link rate, both ways (100mbit, 1gbit, 2.5Gbit/s; default uncapped)")
      ->type_name("RATE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cli.add_option("--store-addr", options.store_address,
                 "where ranks reach the store (it then listens on 0.0.0.0); needed with netns hosts. Default 127.0.0.1")
      ->type_name("HOST[:PORT]")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cli.add_option_function<std::string>(
         "--timeout-grace", [&options](const std::string& text) { options.grace_seconds = parse_seconds(text); },
         "time between SIGTERM and SIGKILL when stopping the ranks after one failed (default 5s)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(check_duration, ""))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cli.add_option("--max-restarts", options.max_restarts,
                 "when a rank fails, stop every rank and start them all again, up to N times, with "
                 "train.resume=auto (default 0)")
      ->type_name("N")
      ->check(whole_number_of_at_least(0))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cli.add_option_function<std::string>(
         "--restart-backoff",
         [&options](const std::string& text) { options.restart_backoff_seconds = parse_seconds(text); },
         "with --max-restarts: time to wait before each restart (default 1s)")
      ->type_name("SECONDS")
      ->check(CLI::Validator(check_duration, ""))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// The command left over by the parse, checked with what the flags must give.
std::vector<std::string> command_of(std::vector<std::string> rest, const launch::LaunchOptions& options) {
  if (!rest.empty() && rest[0] == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest[0].size() > 1 && rest[0][0] == '-') {
    throw UsageError{"unknown flag '" + rest[0] + "'"};
  }
  if (rest.empty()) throw UsageError{"no command to run"};
  if (options.nproc == 0 && options.hosts.empty() && !options.emulate) {
    throw UsageError{"--nproc N (or --hosts SPEC) is required (or --emulate HxR)"};
  }
  return rest;
}

// The emulated cluster the flags ask for, if any.
std::optional<launch::EmulatedClusterSpec> emulated_cluster(const EmulateFlags& flags) {
  if (flags.cluster.empty()) {
    if (!flags.link_rate.empty()) throw UsageError{"--link-rate caps an emulated cluster's links: give --emulate HxR"};
    return std::nullopt;
  }
  launch::EmulatedClusterSpec spec = launch::parse_emulate(flags.cluster);
  if (!flags.link_rate.empty()) {
    try {
      spec.link_bits_per_s = parse_bit_rate(flags.link_rate);
    } catch (const Error& e) {
      throw ConfigError("--link-rate", e.what());
    }
  }
  return spec;
}

// The launcher's usage errors show the usage line, as its help does not fit one.
int usage_error(const std::string& message) {
  std::cerr << "giant launch: " + message + "\n" + kUsageLine + "(giant launch --help explains the flags)\n"
            << std::flush;
  return kExitBadInput;
}

}  // namespace

// Exit status 0 for --help, 2 for any bad input (CLI11's own parse errors
// included: their exit codes are CLI11's, not ours), 1 for the launcher's own
// failures, else what the ranks give (see launch::run_launch).
int launch_command(const std::vector<std::string>& args) {
  launch::LaunchOptions options;
  CLI::App cli(kDescription, "giant launch");
  EmulateFlags emulate;
  add_flags(cli, options, emulate);
  GlobalFlags global;
  add_global_flags(cli, global);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
    cli.parse(reversed);
    options.emulate = emulated_cluster(emulate);
    options.command = command_of(cli.remaining(), options);
    apply_global_flags(global);
  } catch (const CLI::CallForHelp&) {
    std::cout << cli.help() << std::flush;
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  } catch (const UsageError& e) {
    return usage_error(e.message);
  } catch (const ConfigError& e) {  // --hosts, --emulate, --log-level
    return usage_error(e.what());
  }
  options.environment = ccl::Environment::from_process();
  try {
    return launch::run_launch(options, std::cerr);
  } catch (const ConfigError& e) {  // checked before any rank starts
    return usage_error(e.what());
  } catch (const std::exception& e) {
    return report_failure("giant launch", e);
  }
}

}  // namespace giant::app
