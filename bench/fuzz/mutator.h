// Mutations of the fuzzers' inputs: what a corrupt disk, a careless edit, a
// broken link or a hostile peer does to a file or a message (bit flips,
// insertions, cuts, splices, and JSON-aware edits: hostile numbers and
// strings, duplicated members). Deterministic for a seed.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace giant::fuzz {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : random_(seed) {}

  // `input` changed by one to four mutations; `others` are inputs to
  // splice from (may be empty).
  std::string mutate(const std::string& input, const std::vector<std::string>& others);
  // Another file size: near `actual` or a hostile one (0, huge, the largest).
  uint64_t mutate_size(uint64_t actual);

  uint64_t below(uint64_t n) { return n == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, n - 1)(random_); }

 private:
  void flip_bit(std::string& s);
  void insert_byte(std::string& s);
  void erase_range(std::string& s);
  void truncate(std::string& s);
  void splice(std::string& s, const std::vector<std::string>& others);
  void replace_number(std::string& s);
  void duplicate_member(std::string& s);
  void replace_string(std::string& s);

  std::mt19937_64 random_;
};

// The input as hex, 32 bytes a line, for a failure report.
std::string hex_dump(const std::string& bytes);

}  // namespace giant::fuzz
