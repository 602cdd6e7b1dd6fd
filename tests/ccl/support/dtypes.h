// Test-side element types: typed host buffers, our own f16/bf16 conversions
// (independent of the library's, so the two check each other), input
// patterns whose reductions are exact in every dtype, and comparison with a
// one-ulp tolerance for avg.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "giant/ccl/types.h"

namespace giant::ccl::test {

// IEEE binary16 and bfloat16, round to nearest even (NaN stays NaN).
uint16_t half_bits_from_float(float value);
float float_from_half_bits(uint16_t bits);
uint16_t bfloat16_bits_from_float(float value);
float float_from_bfloat16_bits(uint16_t bits);

// A host buffer of `count` elements of `dtype`, with element access as double.
class Buffer {
 public:
  Buffer() = default;
  Buffer(DType dtype, size_t count);

  DType dtype() const { return dtype_; }
  size_t count() const { return count_; }
  size_t nbytes() const { return bytes_.size(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  // Address of element i (i may equal count, for an end pointer).
  void* at(size_t i) { return bytes_.data() + i * dtype_size(dtype_); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

  double get(size_t i) const;
  // Rounds to the nearest value of the dtype (via float for f16/bf16);
  // integers are rounded and must fit.
  void set(size_t i, double value);
  void fill(const std::function<double(size_t)>& value_at);
  // Every byte set to `byte`: a sentinel to see what an operation wrote.
  void fill_bytes(uint8_t byte);

 private:
  DType dtype_ = DType::f32;
  size_t count_ = 0;
  std::vector<uint8_t> bytes_;
};

// The spacing of the dtype's values at `value` (0 for integer dtypes).
double ulp(DType dtype, double value);

// Mismatches seen by one rank. Checks record and go on, so every rank keeps
// issuing the same operations (a rank that stopped early would leave its
// peers waiting for it).
class Findings {
 public:
  void add(std::string message);
  bool empty() const { return messages_.empty(); }
  size_t size() const { return messages_.size(); }
  // The first `max_lines` findings, one a line, and how many more there were.
  std::string text(size_t max_lines = 12) const;

 private:
  std::vector<std::string> messages_;
};

// Compares got[offset + i] with expected(i) for i < count: exactly (bit for
// bit after rounding expected to the dtype), or within one ulp of the exact
// value when one_ulp is set. Records the first mismatch and how many there
// were under `context`.
void compare(const Buffer& got, size_t offset, size_t count,
             const std::function<double(size_t)>& expected, bool one_ulp, const std::string& context,
             Findings& findings);
// Checks that `count` elements from `offset` still hold the sentinel byte.
void compare_untouched(const Buffer& got, size_t offset, size_t count, uint8_t sentinel,
                       const std::string& context, Findings& findings);

// A small integer in [0, 40] that varies pseudo-randomly with its arguments.
int pattern(int rank, size_t index, uint32_t salt = 0);

// Input element of `rank` at `index` for a reduction with `op`. Exact in every
// dtype, and any reduction over up to 5 ranks stays exact: sums lie in
// [0, 200] for u8 and [-100, 100] otherwise (bf16 holds integers to 256),
// products use factors in {1, 2} (u8) or {-2, -1, 1, 2}, so |prod| <= 32.
double reduction_input(DType dtype, ReduceOp op, int rank, size_t index, uint32_t salt = 0);
// The exact reduction of reduction_input over ranks 0..nranks-1 (avg not
// rounded to the dtype).
double reduction_expected(DType dtype, ReduceOp op, int nranks, size_t index, uint32_t salt = 0);

// Input element of `rank` at `index` for data movement (gather, broadcast...):
// an integer in [0, 204], exact in every dtype and different between ranks.
double movement_input(int rank, size_t index, uint32_t salt = 0);

// FNV-1a of a byte range, to compare results across ranks cheaply.
uint64_t fnv1a(const void* data, size_t nbytes);

}  // namespace giant::ccl::test
