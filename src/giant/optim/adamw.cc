#include "giant/optim/adamw.h"

#include <cmath>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "giant/base/error.h"

namespace giant::optim {
namespace {

struct Coefficients {
  float beta1, beta2, eps, step_size, inv_sqrt_bc2, keep;  // keep: 1 - lr * decay
  float grad_scale;
};

void fused_update(float* p, const float* g, float* m, float* v, int64_t n, const Coefficients& c) {
  at::parallel_for(0, n, 1 << 15, [&](int64_t begin, int64_t end) {
    const float one_minus_beta1 = 1.0f - c.beta1, one_minus_beta2 = 1.0f - c.beta2;
    for (int64_t i = begin; i < end; ++i) {
      const float grad = g[i] * c.grad_scale;
      const float first = c.beta1 * m[i] + one_minus_beta1 * grad;
      const float second = c.beta2 * v[i] + one_minus_beta2 * grad * grad;
      m[i] = first;
      v[i] = second;
      p[i] = p[i] * c.keep - c.step_size * first / (std::sqrt(second) * c.inv_sqrt_bc2 + c.eps);
    }
  });
}

std::vector<bool> decay_flags(const std::vector<at::Tensor>& parameters) {
  std::vector<bool> decay;
  for (const auto& p : parameters) decay.push_back(AdamW::decays(p));
  return decay;
}

}  // namespace

AdamW::AdamW(std::vector<at::Tensor> parameters, AdamWOptions options)
    : AdamW(parameters, decay_flags(parameters), options) {}

AdamW::AdamW(std::vector<at::Tensor> parameters, std::vector<bool> decay, AdamWOptions options)
    : parameters_(std::move(parameters)), decay_(std::move(decay)), options_(options) {
  GIANT_CHECK(decay_.size() == parameters_.size(), "AdamW: ", decay_.size(), " decay flags for ",
              parameters_.size(), " parameters");
  GIANT_CHECK(options_.beta1 >= 0 && options_.beta1 < 1 && options_.beta2 >= 0 &&
                  options_.beta2 < 1,
              "AdamW betas must be in [0, 1), got ", options_.beta1, ", ", options_.beta2);
  moments_.reserve(parameters_.size());
  for (const auto& p : parameters_) {
    moments_.push_back({at::zeros_like(p, at::MemoryFormat::Contiguous),
                        at::zeros_like(p, at::MemoryFormat::Contiguous)});
  }
}

void AdamW::zero_grad() {
  for (auto& p : parameters_) {
    p.mutable_grad().reset();
  }
}

void AdamW::step(double lr, double grad_scale) {
  at::NoGradGuard no_grad;
  ++step_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const at::Tensor& grad = parameters_[i].grad();
    if (!grad.defined()) {
      continue;
    }
    const double decay = decay_[i] ? options_.weight_decay : 0.0;
    update(parameters_[i], grad, moments_[i], lr, decay, grad_scale);
  }
}

void AdamW::update(at::Tensor& parameter, const at::Tensor& grad, Moments& moments, double lr, double decay,
                   double grad_scale) const {
  const double bc1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bc2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  const double step_size = lr / bc1;
  if (parameter.device().is_cpu() && parameter.scalar_type() == at::kFloat &&
      parameter.is_contiguous() && grad.is_contiguous() && grad.scalar_type() == at::kFloat) {
    const Coefficients c{static_cast<float>(options_.beta1), static_cast<float>(options_.beta2),
                         static_cast<float>(options_.eps),   static_cast<float>(step_size),
                         static_cast<float>(1.0 / std::sqrt(bc2)),
                         static_cast<float>(1.0 - lr * decay), static_cast<float>(grad_scale)};
    fused_update(parameter.data_ptr<float>(), grad.data_ptr<float>(),
                 moments.first.data_ptr<float>(), moments.second.data_ptr<float>(),
                 parameter.numel(), c);
    return;
  }
  // The same update as tensor ops, for any device and dtype.
  const at::Tensor scaled = grad_scale == 1.0 ? grad : grad * grad_scale;
  parameter.mul_(1.0 - lr * decay);
  moments.first.mul_(options_.beta1).add_(scaled, 1.0 - options_.beta1);
  moments.second.mul_(options_.beta2).addcmul_(scaled, scaled, 1.0 - options_.beta2);
  at::Tensor denom = (moments.second.sqrt() / std::sqrt(bc2)).add_(options_.eps);
  parameter.addcdiv_(moments.first, denom, -step_size);
}

}  // namespace giant::optim
