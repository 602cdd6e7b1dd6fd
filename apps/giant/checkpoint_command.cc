// giant checkpoint {info, verify, export, import}: the dispatcher.
#include <iostream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/edit_distance.h"

namespace giant::app {

namespace {

constexpr const char* kCheckpointUsage =
    "giant checkpoint <subcommand> [args]: inspect, check and convert checkpoints.\n"
    "  info DIR                                   step, layout, tensors and sizes\n"
    "  verify DIR                                 every file's checksum and every piece present\n"
    "  export --format hf-gpt2 DIR OUT            a Hugging Face GPT2LMHeadModel folder\n"
    "  import --format hf-gpt2 DIR OUT            a Giant checkpoint from such a folder\n"
    "DIR is a checkpoint folder (step_XXXXXXXX) or a checkpoint.dir (its latest checkpoint).";

}  // namespace

int checkpoint_command(const std::vector<std::string>& args) {
  if (args.empty() || args.front() == "--help" || args.front() == "-h" || args.front() == "help") {
    (args.empty() ? std::cerr : std::cout) << kCheckpointUsage << "\n";
    return args.empty() ? kExitBadInput : kExitOk;
  }
  const std::string sub = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "info") return checkpoint_info_command(rest);
  if (sub == "verify") return checkpoint_verify_command(rest);
  if (sub == "export") return checkpoint_export_command(rest);
  if (sub == "import") return checkpoint_import_command(rest);
  std::cerr << "giant checkpoint: unknown subcommand '" << sub << "'"
            << did_you_mean(sub, {"info", "verify", "export", "import"}) << "\n"
            << kCheckpointUsage << "\n";
  return kExitBadInput;
}

}  // namespace giant::app
