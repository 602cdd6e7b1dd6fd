// Running a /bin/sh script and reading what it printed: for the few places
// that drive system tools (iproute2's `ip` and `tc` for emulated hosts).
#pragma once

#include <string>

namespace giant {

struct ShellResult {
  int status = -1;     // the script's exit status; -1 when it could not run or was killed
  std::string output;  // stdout and stderr together
};

// Runs `script` with /bin/sh and waits for it. Output buffered by this
// process is flushed first, so it does not appear twice or out of order.
ShellResult run_shell(const std::string& script);

}  // namespace giant
