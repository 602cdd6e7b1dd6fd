#include "giant/optim/master_weights.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "giant/base/error.h"

namespace giant::optim {

MasterWeights::MasterWeights(std::vector<at::Tensor> compute, const std::vector<at::Tensor>& initial,
                             const std::vector<at::Tensor>& gradient)
    : compute_(std::move(compute)) {
  GIANT_CHECK(initial.size() == compute_.size() && gradient.size() == compute_.size(), "master weights: ",
              compute_.size(), " compute tensors, ", initial.size(), " initial values, ", gradient.size(),
              " gradients");
  at::NoGradGuard no_grad;
  masters_.reserve(compute_.size());
  for (size_t i = 0; i < compute_.size(); ++i) {
    GIANT_CHECK(initial[i].sizes() == compute_[i].sizes() && gradient[i].sizes() == compute_[i].sizes(),
                "master weight ", i, ": compute ", compute_[i].sizes(), ", initial ", initial[i].sizes(),
                ", gradient ", gradient[i].sizes());
    at::Tensor master = initial[i].to(at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
    master.mutable_grad() = gradient[i];
    masters_.push_back(std::move(master));
  }
}

void MasterWeights::copy_to_compute() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < compute_.size(); ++i) compute_[i].copy_(masters_[i]);
}

}  // namespace giant::optim
