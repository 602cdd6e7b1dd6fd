// What the tests that run the launch CLI share: its path (set by
// src/giant/launch/CMakeLists.txt for those test binaries only) and joining
// argument lists.
#pragma once

#include <string>
#include <vector>

namespace giant::launch::test {

#ifndef GIANT_LAUNCH_TEST_CLI
#error "GIANT_LAUNCH_TEST_CLI is set by src/giant/launch/CMakeLists.txt"
#endif
// The test CLI program (`giant launch` without the rest of giant).
constexpr const char* kCli = GIANT_LAUNCH_TEST_CLI;

// a's arguments followed by b's.
inline std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace giant::launch::test
