// A call back each time a parameter's gradient has been accumulated: what
// the data-parallel engines start their reductions from.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace giant::parallel {

struct AccumulatedHook {
  // The parameter holds its accumulator only weakly: keep this alive, or the
  // hook would vanish with the first graph.
  std::shared_ptr<torch::autograd::Node> accumulator;
  uintptr_t key = 0;  // for accumulator->del_post_hook
};

// Calls `ready` after each accumulation into `parameter`'s gradient (a leaf
// that requires one; `index` names it in the error otherwise).
AccumulatedHook on_gradient_accumulated(const at::Tensor& parameter, size_t index, std::function<void()> ready);

}  // namespace giant::parallel
