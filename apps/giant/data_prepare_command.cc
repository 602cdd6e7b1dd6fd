// Placeholder: being written (issue 19).
#include <string>
#include <vector>
#include <iostream>

#include "cli_support.h"
#include "commands.h"

namespace giant::app {

int data_prepare_command(const std::vector<std::string>& /*args*/) {
  std::cerr << "giant data: not implemented yet\n";
  return kExitFailed;
}

}  // namespace giant::app
