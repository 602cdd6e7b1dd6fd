#include "giant/models/layer_norm.h"

#include <ATen/ATen.h>

#include "giant/models/gpt_config.h"

namespace giant::models {

at::Tensor layer_norm_fp32(const at::Tensor& x, int64_t hidden, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.scalar_type() == at::kFloat) return at::layer_norm(x, {hidden}, weight, bias, kLayerNormEpsilon);
  return at::layer_norm(x.to(at::kFloat), {hidden}, weight.to(at::kFloat), bias.to(at::kFloat),
                        kLayerNormEpsilon)
      .to(x.scalar_type());
}

}  // namespace giant::models
