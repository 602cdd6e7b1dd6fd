// What every giant command shares on its command line: the exit statuses,
// the flags every command takes (--log-level, --log-timestamps), parsing
// with CLI11, and turning CLI11's errors and escaping exceptions into an
// exit status with a message in the user's terms.
#pragma once

#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace giant::app {

constexpr int kExitOk = 0;        // done
constexpr int kExitFailed = 1;    // a runtime failure
constexpr int kExitBadInput = 2;  // bad flags, config or environment

// Flags every command takes, before its name (giant --log-level debug train)
// or after it (giant train --log-level debug).
struct GlobalFlags {
  std::string log_level;  // empty: not given
  bool log_timestamps = false;
};
void add_global_flags(CLI::App& app, GlobalFlags& flags);

// The process's logging from log.level and log.timestamps: defaults <
// GIANT_LOG_LEVEL, GIANT_LOG_TIMESTAMPS in env < the flags. Throws
// ConfigError naming the variable or flag.
void configure_logging(const GlobalFlags& flags, const std::map<std::string, std::string>& env);
// A command's own global flags: those given win over what configure_logging
// set before the command's name was read; the others leave it as it is.
void apply_global_flags(const GlobalFlags& flags);

// Parses args (what follows the command's name) with app. nullopt: go on;
// otherwise the exit status, after printing the help or version (kExitOk) or
// the error and where to find help (kExitBadInput) -- never CLI11's own codes.
std::optional<int> parse_command_line(CLI::App& app, const std::vector<std::string>& args);

// The exit status for an exception that ended command, after printing
// "COMMAND: what" on stderr: kExitBadInput for a ConfigError (bad config,
// flag or environment), kExitFailed for anything else.
int report_failure(const std::string& command, const std::exception& e);

}  // namespace giant::app
