// Placeholder: implemented by issue 18 work in progress.
#include <iostream>

#include "cli_support.h"
#include "commands.h"

namespace giant::app {
int generate_command(const std::vector<std::string>&) { std::cerr << "giant generate: not built yet\n"; return kExitFailed; }
}  // namespace giant::app
