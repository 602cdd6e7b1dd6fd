#include "giant/models/layer_norm.h"

#include <ATen/ATen.h>

namespace giant::models {

at::Tensor layer_norm_fp32(const at::Tensor& x, int64_t hidden, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.scalar_type() == at::kFloat) return at::layer_norm(x, {hidden}, weight, bias, 1e-5);
  return at::layer_norm(x.to(at::kFloat), {hidden}, weight.to(at::kFloat), bias.to(at::kFloat), 1e-5)
      .to(x.scalar_type());
}

}  // namespace giant::models
