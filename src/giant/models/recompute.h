// Activation recomputation (Korthikanti et al. 2022): a tensor-to-tensor
// function whose forward keeps only its input, and runs again in backward.
// libtorch's C++ API has no torch.utils.checkpoint; this is its reentrant
// form.
#pragma once

#include <functional>

#include <ATen/core/Tensor.h>

namespace giant::models {

using TensorFunction = std::function<at::Tensor(const at::Tensor&)>;

// function(input), keeping for backward only `input` and the default CPU
// generator's state (so dropout draws the same masks again). Backward
// restores that state, runs `function` again with gradients on a detached
// copy of the input, backpropagates the incoming gradient through it (the
// parameters' gradients accumulate as usual, their accumulator hooks fire),
// puts the generator back and returns the input's gradient. `function` must
// compute the same thing both times (same collectives, in the same order,
// on every rank) and must outlive the backward.
//
// Without gradients (inference, evaluation) it is function(input): nothing
// is kept. An input that requires no gradient still gets the parameters'
// gradients (through a detached copy that does).
at::Tensor recompute(const TensorFunction& function, const at::Tensor& input);

}  // namespace giant::models
