// giant data {prepare, train-tokenizer}: the dispatcher.
#include <iostream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/edit_distance.h"

namespace giant::app {

namespace {

constexpr const char* kDataUsage =
    "giant data <subcommand> [args]: prepare training data.\n"
    "  prepare --input FILE... --tokenizer SPEC --output PREFIX [flags]\n"
    "                                             text or JSON lines -> Megatron PREFIX.bin + PREFIX.idx\n"
    "  train-tokenizer --vocab-size N --output DIR FILE...\n"
    "                                             learn a GPT-2 style byte-level BPE (vocab.json, merges.txt)\n"
    "See giant data <subcommand> --help.";

}  // namespace

int data_command(const std::vector<std::string>& args) {
  if (args.empty() || args.front() == "--help" || args.front() == "-h" || args.front() == "help") {
    (args.empty() ? std::cerr : std::cout) << kDataUsage << "\n";
    return args.empty() ? kExitBadInput : kExitOk;
  }
  const std::string sub = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "prepare") return data_prepare_command(rest);
  if (sub == "train-tokenizer") return data_train_tokenizer_command(rest);
  std::cerr << "giant data: unknown subcommand '" << sub << "'"
            << did_you_mean(sub, {"prepare", "train-tokenizer"}) << "\n"
            << kDataUsage << "\n";
  return kExitBadInput;
}

}  // namespace giant::app
