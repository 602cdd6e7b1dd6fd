// giant bench NAME [flags]: runs the benchmarks' own program, giant-bench,
// from the directory this program is in (the build tree's bin/ and the
// install tree's both hold the two), so that the giant command links no
// benchmark code.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "commands.h"

namespace giant::app {
namespace {

// giant-bench beside this program, or "" when /proc/self/exe cannot say.
std::string bench_program_path() {
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size());
  if (n <= 0 || static_cast<size_t>(n) >= self.size()) return "";
  self.resize(static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "giant-bench";
}

}  // namespace

int bench_command(const std::vector<std::string>& args, const GlobalFlags& global) {
  const std::string program = bench_program_path();
  if (program.empty() || access(program.c_str(), X_OK) != 0) {
    std::cerr << "giant bench: the benchmarks are a program of their own, giant-bench, expected at "
              << (program.empty() ? std::string("the giant command's directory") : program)
              << ", which is missing: build it (cmake --build BUILD --target giant-bench) or install it beside "
                 "giant\n";
    return kExitBadInput;
  }
  // The global flags given before `bench` go first; those after the
  // benchmark's name still win, as they do for every command.
  std::vector<std::string> words{program};
  if (!global.log_level.empty()) words.insert(words.end(), {"--log-level", global.log_level});
  if (global.log_timestamps) words.push_back("--log-timestamps");
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  execv(program.c_str(), argv.data());
  std::cerr << "giant bench: cannot run " << program << ": " << std::strerror(errno) << "\n";
  return kExitFailed;
}

}  // namespace giant::app
