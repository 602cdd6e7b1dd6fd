#include "giant/optim/clipping.h"

#include <cmath>

#include <ATen/ATen.h>

namespace giant::optim {

double global_grad_norm(const std::vector<at::Tensor>& parameters) {
  double sum_of_squares = 0.0;
  for (const auto& p : parameters) {
    const at::Tensor& grad = p.grad();
    if (grad.defined()) {
      const double norm = grad.norm().item<double>();
      sum_of_squares += norm * norm;
    }
  }
  return std::sqrt(sum_of_squares);
}

void clip_grads_to_norm(const std::vector<at::Tensor>& parameters, double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) {
    return;
  }
  const double scale = max_norm / (norm + 1e-6);
  for (const auto& p : parameters) {
    at::Tensor grad = p.grad();
    if (grad.defined()) {
      grad.mul_(scale);
    }
  }
}

}  // namespace giant::optim
