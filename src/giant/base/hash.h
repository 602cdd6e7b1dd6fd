// Stable 64-bit hashing for seeds: the same values on every platform and
// standard library (unlike std::hash), since sample orders and initial
// weights are part of a run's reproducibility. Changing these changes what
// every seed produces.
#pragma once

#include <cstdint>
#include <string_view>

namespace giant {

// splitmix64's output function: a bijection on 64 bits with good avalanche.
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// FNV-1a of a string.
inline uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return h;
}

}  // namespace giant
