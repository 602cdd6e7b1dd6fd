// giant checkpoint export|import --format hf-gpt2 DIR OUT: conversions
// between Giant checkpoints and Hugging Face GPT-2 folders.
#include <filesystem>
#include <functional>
#include <iostream>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/error.h"
#include "giant/checkpoint/hf_gpt2.h"
#include "giant/checkpoint/safetensors.h"

namespace giant::app {
namespace {

using Convert = std::function<void(const std::filesystem::path&, const std::filesystem::path&)>;

// A conversion's command line: --format (required, one value today), DIR
// and OUT. An input that is not what it should be (FormatError: no
// checkpoint, a bad config.json, a tensor of the wrong shape) is bad input;
// failing to write OUT is a runtime failure.
int run_conversion(const std::vector<std::string>& args, const std::string& name, const std::string& description,
                   const std::string& dir_help, const std::string& out_help, const Convert& convert) {
  CLI::App cli(description, name);
  std::string format, dir, out;
  GlobalFlags global;
  cli.add_option("--format", format, "the other side's format: hf-gpt2 (transformers' GPT2LMHeadModel)")
      ->required()
      ->check(CLI::IsMember({"hf-gpt2"}));
  cli.add_option("DIR", dir, dir_help)->required();
  cli.add_option("OUT", out, out_help)->required();
  add_global_flags(cli, global);
  cli.footer("Exit status: 0 done, 1 failed to write OUT, 2 bad flags or an input that is not what it should be.");
  if (const auto code = parse_command_line(cli, args)) return *code;
  try {
    apply_global_flags(global);
    convert(dir, out);
    std::cout << "wrote " << out << "\n";
    return kExitOk;
  } catch (const checkpoint::FormatError& e) {
    report_failure(name, e);
    return kExitBadInput;
  } catch (const c10::Error& e) {
    return report_failure(name, Error(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return report_failure(name, e);
  }
}

}  // namespace

int checkpoint_export_command(const std::vector<std::string>& args) {
  return run_conversion(args, "giant checkpoint export",
                        "Write a checkpoint's model as a Hugging Face folder (config.json, model.safetensors).",
                        "a checkpoint folder, or a checkpoint.dir (its latest checkpoint)",
                        "the folder to write: new, empty or a previous export (replaced)",
                        checkpoint::export_hf_gpt2);
}

int checkpoint_import_command(const std::vector<std::string>& args) {
  return run_conversion(args, "giant checkpoint import",
                        "Turn a Hugging Face folder (config.json, model.safetensors) into a Giant checkpoint "
                        "to train or generate from (step 0, no optimizer state).",
                        "the Hugging Face folder", "the checkpoint folder to create (must not exist)",
                        checkpoint::import_hf_gpt2);
}

}  // namespace giant::app
