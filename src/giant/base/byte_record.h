// Little helpers for the small binary states a component saves into a
// checkpoint blob: 8-byte integers and runs of floats appended to a byte
// vector, and read back with every read bounds-checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "giant/base/error.h"

namespace giant {

inline void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

inline void put_floats(std::vector<uint8_t>& out, const float* data, size_t count) {
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + count * sizeof(float));
}

// `what` names the state in the error a short record throws.
inline uint64_t take_u64(const std::vector<uint8_t>& in, size_t& at, const std::string& what) {
  GIANT_CHECK(in.size() >= 8 && at <= in.size() - 8, what, " is truncated");
  uint64_t v;
  std::memcpy(&v, in.data() + at, 8);
  at += 8;
  return v;
}

inline void take_floats(const std::vector<uint8_t>& in, size_t& at, float* data, size_t count,
                        const std::string& what) {
  GIANT_CHECK(at <= in.size() && count <= (in.size() - at) / sizeof(float), what, " is truncated");
  std::memcpy(data, in.data() + at, count * sizeof(float));
  at += count * sizeof(float);
}

}  // namespace giant
