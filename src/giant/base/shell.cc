#include "giant/base/shell.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace giant {

ShellResult run_shell(const std::string& script) {
  ShellResult result;
  std::fflush(nullptr);
  FILE* pipe = ::popen(("(" + script + ") 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    result.output = std::string("popen failed: ") + std::strerror(errno);
    return result;
  }
  char buffer[4096];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, got);
  const int status = ::pclose(pipe);
  result.status = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace giant
