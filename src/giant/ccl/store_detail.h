// Helpers shared by the Store implementations (not part of the public API).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "giant/ccl/store.h"

namespace giant::ccl::detail {

// add() semantics shared by every store: the value is decimal ASCII text
// ("3", "-12"), so get() of a counter reads naturally; a missing key counts
// as 0. Throws giant::Error if the old value is not an integer or the sum
// overflows.
int64_t add_to_decimal(const std::string& key, const Bytes* old_value, int64_t delta);
Bytes decimal_bytes(int64_t value);

// "'a', 'b'" (at most a handful, then "and N more"), for timeout messages.
std::string describe_keys(const std::vector<std::string>& keys);

}  // namespace giant::ccl::detail
