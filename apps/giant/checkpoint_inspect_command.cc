// Placeholder: implemented by issue 18 work in progress.
#include <iostream>

#include "cli_support.h"
#include "commands.h"

namespace giant::app {
int checkpoint_info_command(const std::vector<std::string>&) { std::cerr << "giant checkpoint info: not built yet\n"; return kExitFailed; }
int checkpoint_verify_command(const std::vector<std::string>&) { std::cerr << "giant checkpoint verify: not built yet\n"; return kExitFailed; }
}  // namespace giant::app
