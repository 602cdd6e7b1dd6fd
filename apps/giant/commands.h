// The giant command's subcommands. Each takes the arguments after its name
// and returns the process's exit status (cli_support.h: 0 ok, 1 failed,
// 2 bad flags, config or environment).
#pragma once

#include <string>
#include <vector>

#include "cli_support.h"

namespace giant::app {

int train_command(const std::vector<std::string>& args);
int launch_command(const std::vector<std::string>& args);
// Runs giant-bench (bench/giant_bench.cc) beside this program, passing on
// the global flags given before `bench`.
int bench_command(const std::vector<std::string>& args, const GlobalFlags& global);
int plan_command(const std::vector<std::string>& args);
int generate_command(const std::vector<std::string>& args);      // generate_command.cc
// giant checkpoint {info, verify, export, import} (checkpoint_command.cc
// dispatches; info and verify in checkpoint_inspect_command.cc, export and
// import in checkpoint_convert_command.cc).
int checkpoint_command(const std::vector<std::string>& args);
int checkpoint_info_command(const std::vector<std::string>& args);
int checkpoint_verify_command(const std::vector<std::string>& args);
int checkpoint_export_command(const std::vector<std::string>& args);
int checkpoint_import_command(const std::vector<std::string>& args);
// giant data {prepare, train-tokenizer} (data_command.cc dispatches;
// data_prepare_command.cc, data_train_tokenizer_command.cc).
int data_command(const std::vector<std::string>& args);
int data_prepare_command(const std::vector<std::string>& args);
int data_train_tokenizer_command(const std::vector<std::string>& args);

}  // namespace giant::app
