// Reading TensorBoard event files in tests, apart from Giant's writer:
// support/read_event_file.py (Debian's python3-protobuf) decodes them.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

namespace giant::train::test {

struct Scalar {
  int64_t step;
  std::string tag;
  double value;  // a float32 value, exactly
};

// The scalars of an event file as the independent decoder reads them; a
// failure of the decoder fails the test with its reason.
inline std::vector<Scalar> decode(const std::string& event_file) {
  const std::string command = "/usr/bin/python3 " + std::string(GIANT_SOURCE_DIR) +
                              "/tests/train/support/read_event_file.py '" + event_file + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return {};
  std::string text;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << text;
  if (status != 0) return {};
  std::vector<Scalar> scalars;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    Scalar s;
    std::string value;
    fields >> s.step >> s.tag >> value;
    s.value = std::stod(value);
    scalars.push_back(s);
  }
  return scalars;
}

// The event files in a directory.
inline std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(entry.path());
  }
  return files;
}

}  // namespace giant::train::test
