// LayerNorm as the models run it: statistics and affine in float32 whatever
// the activations' dtype, the result in that dtype.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace giant::models {

// Over the last dimension (`hidden` wide), eps kLayerNormEpsilon (1e-5). libtorch's own bf16
// kernel loses the mean of rows far from zero (0.56 off at mean 100); the
// float32 kernel with the casts is also faster than it.
at::Tensor layer_norm_fp32(const at::Tensor& x, int64_t hidden, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace giant::models
