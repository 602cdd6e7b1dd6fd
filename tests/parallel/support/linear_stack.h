// A small LayerStack of linear layers with tanh between, for the ZeRO-3
// tests: odd sizes (dp blocks cut through parameters, the last padded) and
// values from a formula, so every rank and every process builds the same
// model without the global generator.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "giant/parallel/layer_list.h"

namespace giant::parallel::test {

// (in, out) of each linear layer.
const std::vector<std::pair<int64_t, int64_t>>& linear_stack_shapes();
LayerStack make_linear_stack();
// Rank `rank`'s input of micro-batch `micro_batch` in step `step`.
torch::Tensor linear_stack_input(int rank, int micro_batch, int step);

}  // namespace giant::parallel::test
