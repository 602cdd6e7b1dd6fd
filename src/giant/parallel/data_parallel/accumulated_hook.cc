#include "giant/parallel/data_parallel/accumulated_hook.h"

#include <utility>

#include "giant/base/error.h"

namespace giant::parallel {
namespace {

struct ReadyCall : torch::autograd::FunctionPostHook {
  explicit ReadyCall(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ready_();
    return outputs;
  }
  std::function<void()> ready_;
};

}  // namespace

AccumulatedHook on_gradient_accumulated(const at::Tensor& parameter, size_t index, std::function<void()> ready) {
  AccumulatedHook hook;
  hook.accumulator = torch::autograd::impl::grad_accumulator(parameter);
  GIANT_CHECK(hook.accumulator != nullptr, "parameter ", index, " is not a leaf that requires a gradient");
  hook.key = hook.accumulator->add_post_hook(std::make_unique<ReadyCall>(std::move(ready)));
  return hook;
}

}  // namespace giant::parallel
