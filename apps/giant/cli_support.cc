#include "cli_support.h"

#include <iostream>

#include <CLI/CLI.hpp>

#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/base/tunables.h"

namespace giant::app {
namespace {

// The level as --log-level gives it: parse_log_level's names and message.
CLI::Validator log_level_names() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_log_level(text);
          return "";
        } catch (const Error& e) {
          return e.what();
        }
      },
      "");
}

}  // namespace

void add_global_flags(CLI::App& app, GlobalFlags& flags) {
  app.add_option("--log-level", flags.log_level,
                 "messages shown: debug, info, warn, error or off (default info, or GIANT_LOG_LEVEL)")
      ->type_name("LEVEL")
      ->check(log_level_names());
  app.add_flag("--log-timestamps", flags.log_timestamps,
               "start each log line with the UTC time (or GIANT_LOG_TIMESTAMPS=true)");
}

void configure_logging(const GlobalFlags& flags, const std::map<std::string, std::string>& env) {
  Tunables keys;
  define_logging_tunables(keys);
  keys.apply_environment(env);
  if (!flags.log_level.empty()) keys.set("log.level", flags.log_level, TunableSource::command_line);
  if (flags.log_timestamps) keys.set("log.timestamps", "true", TunableSource::command_line);
  configure_logging_from(keys);
}

void apply_global_flags(const GlobalFlags& flags) {
  if (!flags.log_level.empty()) set_log_level(parse_log_level(flags.log_level));  // checked by the parser
  if (flags.log_timestamps) set_log_timestamps(true);
}

std::optional<int> parse_command_line(CLI::App& app, const std::vector<std::string>& args) {
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
    app.parse(reversed);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    // Help and --version are "errors" with CLI11's success code.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      app.exit(e, std::cout, std::cerr);
      return kExitOk;
    }
    std::cerr << app.get_name() << ": " << e.what() << "\n(see " << app.get_name() << " --help)\n";
    return kExitBadInput;
  }
}

int report_failure(const std::string& command, const std::exception& e) {
  std::cerr << command << ": " << e.what() << '\n';
  return dynamic_cast<const ConfigError*>(&e) != nullptr ? kExitBadInput : kExitFailed;
}

}  // namespace giant::app
