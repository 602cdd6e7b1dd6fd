// Tolerances, data and comparisons the tensor-collective and
// tensor-parallel layer tests share.
//
// Tolerance: per-tensor relative norm ||a - b|| / ||b|| (support/
// tensor_error.h) within a worst-case rounding bound (support/rounding.h):
// a layer split over ranks sums each reduction in another order, and every
// reduction here is at most kLongestReduction terms, plus at most 4 ranks'
// parts. Two orders of a sum of n terms differ by at most 2 gamma_n relative
// to the terms' magnitudes; the inputs are drawn with random signs, whose
// sums are about 1 / sqrt(n) of those magnitudes (these tensors are too
// small for the norm-wise average of rounding errors to help). The
// collectives' own tests measure the cancellation on their inputs. Integer
// results and pure data movement are compared exactly.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "support/rounding.h"
#include "support/tensor_error.h"

namespace giant::parallel::test {

inline constexpr int64_t kLongestReduction = 36;  // the column case's 36 outputs, in its input gradient
inline constexpr int kMostRanks = 4;
inline const double kTolerance = 2 * giant::test::gamma(kLongestReduction + kMostRanks, giant::test::unit_roundoff(Precision::fp32)) *
                          std::sqrt(static_cast<double>(kLongestReduction));
inline constexpr uint64_t kSeed = 1234;
inline constexpr int64_t kLayerIndex = 3;
inline const std::vector<int> kWorldSizes{1, 2, 3, 4};

// Two orders of the sum of `size` tensors differ by at most 2 gamma_size (in
// the dtype's unit roundoff) of the sum of their magnitudes: relative to the
// sum itself, times how much the terms cancel.
inline double sum_bound(const std::vector<torch::Tensor>& terms, double u) {
  torch::Tensor sum = torch::zeros_like(terms[0], torch::kDouble), magnitude = sum.clone();
  for (const auto& t : terms) {
    sum += t.to(torch::kDouble);
    magnitude += t.to(torch::kDouble).abs();
  }
  const double cancellation = magnitude.norm().item<double>() / sum.norm().item<double>();
  return 2 * giant::test::gamma(static_cast<int64_t>(terms.size()), u) * cancellation;
}

// Shapes equal and ||a - b|| / ||b|| within the tolerance.
inline void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what,
                  double tolerance = kTolerance) {
  ASSERT_TRUE(a.defined()) << what << ": undefined";
  ASSERT_TRUE(b.defined()) << what << ": reference undefined";
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec()) << what;
  EXPECT_LE(giant::test::relative_error(a, b), tolerance) << what;
}

inline void expect_equal(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what << ": undefined";
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec()) << what;
  ASSERT_EQ(a.scalar_type(), b.scalar_type()) << what;
  EXPECT_TRUE(torch::equal(a, b)) << what << "\n got " << a << "\n want " << b;
}

inline std::string at_size(const std::string& what, int rank, int size) {
  return what + " (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
}

// Deterministic per-(tag, rank) data, drawn on the calling thread before the
// ranks start (the global generator is not shared with the rank threads).
inline torch::Tensor draw(at::IntArrayRef shape, int64_t tag, torch::Dtype dtype = torch::kFloat) {
  torch::manual_seed(1000 + tag);
  return torch::randn(shape, torch::TensorOptions().dtype(torch::kDouble)).to(dtype);
}
inline std::vector<torch::Tensor> draw_per_rank(at::IntArrayRef shape, int size, int64_t tag,
                                         torch::Dtype dtype = torch::kFloat) {
  std::vector<torch::Tensor> out;
  for (int r = 0; r < size; ++r) out.push_back(draw(shape, tag * 16 + r, dtype));
  return out;
}

}  // namespace giant::parallel::test
