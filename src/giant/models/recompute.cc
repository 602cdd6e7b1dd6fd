#include "giant/models/recompute.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "giant/base/error.h"

namespace giant::models {
namespace {

at::Tensor generator_state() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_generator_state(const at::Tensor& state) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

// What backward needs besides the input, held in the autograd context.
struct Recipe : torch::CustomClassHolder {
  explicit Recipe(TensorFunction f) : function(std::move(f)) {}
  TensorFunction function;
  at::Tensor generator_state;  // before the forward drew anything
};

class Recomputed : public torch::autograd::Function<Recomputed> {
 public:
  // Function::apply runs this without gradients: nothing inside is kept.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            c10::intrusive_ptr<Recipe> recipe) {
    recipe->generator_state = generator_state();
    at::Tensor output = recipe->function(input);
    ctx->save_for_backward({input});
    ctx->saved_data["recipe"] = c10::IValue::make_capsule(std::move(recipe));
    return output;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list output_grads) {
    auto recipe = c10::static_intrusive_pointer_cast<Recipe>(ctx->saved_data["recipe"].toCapsule());
    const at::Tensor input = ctx->get_saved_variables().at(0).detach().requires_grad_(true);
    at::Tensor output;
    {
      // Draw the forward's masks again, then leave the generator where
      // the rest of backward expects it.
      const at::Tensor now = generator_state();
      set_generator_state(recipe->generator_state);
      torch::AutoGradMode with_gradients(true);
      try {
        output = recipe->function(input);
      } catch (...) {
        set_generator_state(now);
        throw;
      }
      set_generator_state(now);
    }
    GIANT_CHECK(output.requires_grad(),
                "a recomputed function's output does not depend on anything that needs a gradient");
    torch::autograd::backward({output}, {output_grads.at(0)});
    return {input.grad(), at::Tensor()};
  }
};

}  // namespace

at::Tensor recompute(const TensorFunction& function, const at::Tensor& input) {
  if (!at::GradMode::is_enabled()) return function(input);
  // The output needs a gradient only if an input of the autograd function
  // does; the parameters inside `function` are not its inputs.
  const at::Tensor tracked = input.requires_grad() ? input : input.detach().requires_grad_(true);
  return Recomputed::apply(tracked, c10::make_intrusive<Recipe>(function));
}

}  // namespace giant::models
