// The giant command's subcommands. Each takes the arguments after its name
// and returns the process's exit status (cli_support.h: 0 ok, 1 failed,
// 2 bad flags, config or environment).
#pragma once

#include <string>
#include <vector>

namespace giant::app {

int train_command(const std::vector<std::string>& args);
int launch_command(const std::vector<std::string>& args);
int bench_command(const std::vector<std::string>& args);
int plan_command(const std::vector<std::string>& args);

}  // namespace giant::app
