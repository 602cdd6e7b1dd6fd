// Placeholder: implemented by issue 18 work in progress.
#include <iostream>

#include "cli_support.h"
#include "commands.h"

namespace giant::app {
int checkpoint_export_command(const std::vector<std::string>&) { std::cerr << "giant checkpoint export: not built yet\n"; return kExitFailed; }
int checkpoint_import_command(const std::vector<std::string>&) { std::cerr << "giant checkpoint import: not built yet\n"; return kExitFailed; }
}  // namespace giant::app
