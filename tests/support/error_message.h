// What a call throws, for tests that check an error names what it should.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "giant/base/error.h"

namespace giant::test {

// The message of the E that f() throws; "" when it throws nothing. An
// exception of another kind propagates (and fails the test, saying what it was).
template <class E = Error, class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// Whether the message holds every one of `parts` (saying which it lacks).
inline ::testing::AssertionResult names_all(const std::string& message, std::initializer_list<std::string> parts) {
  for (const auto& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << part << "' not in: " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace giant::test
