// What the train tests share: a temporary directory, reading a whole file,
// and a key registry with overrides applied.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/base/tunables.h"
#include "giant/train/run_config.h"
#include "support/error_message.h"

namespace giant::train::test {

// A fresh directory under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "giant-train-test") {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `contents` to path()/name and returns that path.
  std::string file(const std::string& name, const std::string& contents) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p) << contents;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The run's keys with `overrides` applied, in float32 unless they set
// train.precision (tests state the precision: auto would probe the machine),
// and starting afresh unless they set train.resume (a test running twice in
// one folder would otherwise resume from its own last checkpoint).
inline Tunables keys_with(const std::vector<std::string>& overrides) {
  Tunables keys;
  define_run_keys(keys);
  apply_override(keys, "train.precision=\"fp32\"");
  apply_override(keys, "train.resume=\"\"");
  for (const auto& o : overrides) apply_override(keys, o);
  return keys;
}

// The key of the ConfigError that f() throws, or "none".
template <class F>
std::string error_key(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "none";
}

// The message of the ConfigError that f() throws, or "" when none is thrown.
template <class F>
std::string error_message(F&& f) {
  return giant::test::error_message<ConfigError>(f);
}

}  // namespace giant::train::test
