// The tests' one measure of how far a tensor is from its reference: the
// relative norm ||a - b|| / ||b||, computed in double whatever the dtypes
// (a bf16 difference would itself round). The bounds it is held to come from
// support/rounding.h.
#pragma once

#include <limits>

#include <torch/torch.h>

namespace giant::test {

// ||a - b|| / ||b||; 0 when both are zero, infinity when only b is.
inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor reference = b.to(torch::kDouble);
  const double difference = (a.to(torch::kDouble) - reference).norm().item<double>();
  const double norm = reference.norm().item<double>();
  if (norm == 0) return difference == 0 ? 0 : std::numeric_limits<double>::infinity();
  return difference / norm;
}

}  // namespace giant::test
