// Test support for .bin/.idx files: a temporary folder (whole-file reads and
// writes in files.h), and the independent python3 + numpy writer and reader
// (support/megatron_index.py, Debian's /usr/bin/python3).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/support/files.h"

namespace giant::data::test {

// A fresh folder under the test's temporary directory, removed with its contents.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = ::testing::TempDir() + "giant_data_XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::string megatron_index_script() {
  return "/usr/bin/python3 " + std::string(GIANT_SOURCE_DIR) + "/tests/data/support/megatron_index.py";
}

// Writes PREFIX.bin/.idx with the independent writer: each document a list
// of sequences, each a list of ids, stored as `dtype` (numpy's name).
inline void python_write(const std::string& prefix, const std::string& dtype,
                         const std::vector<std::vector<std::vector<int64_t>>>& documents) {
  const nlohmann::json spec = {{"dtype", dtype}, {"documents", documents}};
  const std::string command = megatron_index_script() + " write '" + prefix + "'";
  FILE* pipe = popen(command.c_str(), "w");
  ASSERT_NE(pipe, nullptr) << command;
  const std::string text = spec.dump();
  fwrite(text.data(), 1, text.size(), pipe);
  ASSERT_EQ(pclose(pipe), 0) << command;
}

// What the independent reader finds in PREFIX.bin/.idx: {"dtype",
// "sequences", "document_index"}; fails the test (and returns null) when it
// finds the layout broken.
inline nlohmann::json python_read(const std::string& prefix) {
  const std::string command = megatron_index_script() + " read '" + prefix + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return nullptr;
  std::string text;
  char buffer[65536];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << text;
  if (status != 0) return nullptr;
  return nlohmann::json::parse(text);
}

}  // namespace giant::data::test
