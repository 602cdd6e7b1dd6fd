// The giant command run as a user runs it, as a process through the shell:
// its exit status, standard output and standard error.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "train/support/train_test_support.h"

namespace giant::train::test {

inline const std::string kGiant = std::string(GIANT_BINARY_DIR) + "/giant";

struct Outcome {
  int code;
  std::string out, err;
};

// `env [ENV] giant ARGS` through the shell (ARGS and ENV as a shell reads them).
inline Outcome giant(const std::string& args, const std::string& env = "") {
  TempDir dir("giant-cli-test");
  const std::string out = dir.path() + "/out", err = dir.path() + "/err";
  const std::string command = "env " + env + " " + kGiant + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, read_file(out), read_file(err)};
}

// What the user must never see.
inline void expect_user_terms(const Outcome& r, const std::string& what) {
  EXPECT_EQ(r.err.find(" at giant/"), std::string::npos) << what << ": an internal check's text:\n" << r.err;
  EXPECT_EQ(r.err.find("Run with --help"), std::string::npos) << what << ": CLI11's own text:\n" << r.err;
}

// Exit status 2, with `says` on standard error, in the user's terms.
inline void expect_bad_input(const std::string& args, const std::string& says, const std::string& env = "") {
  const Outcome r = giant(args, env);
  EXPECT_EQ(r.code, 2) << env << " giant " << args << "\n" << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << env << " giant " << args << "\n" << r.err;
  expect_user_terms(r, args);
}

}  // namespace giant::train::test
