#include "parallel/support/linear_stack.h"

#include <string>

namespace giant::parallel::test {
namespace {

constexpr int64_t kBatch = 3;

struct Tanh : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return torch::tanh(x); }
};

}  // namespace

const std::vector<std::pair<int64_t, int64_t>>& linear_stack_shapes() {
  static const std::vector<std::pair<int64_t, int64_t>> shapes{{5, 7}, {7, 3}, {3, 9}, {9, 4}, {4, 2}};
  return shapes;
}

LayerStack make_linear_stack() {
  const auto& shapes = linear_stack_shapes();
  LayerStack stack;
  for (size_t l = 0; l < shapes.size(); ++l) {
    torch::nn::Linear linear(shapes[l].first, shapes[l].second);
    torch::NoGradGuard no_grad;
    for (auto& p : linear->parameters()) {
      const torch::Tensor values = torch::sin(torch::arange(p.numel(), torch::kFloat) * 0.7 + static_cast<double>(l));
      p.copy_(values.reshape(p.sizes()) * 0.5);
    }
    stack->append("linear" + std::to_string(l), torch::nn::AnyModule(linear));
    if (l + 1 < shapes.size()) stack->append("tanh" + std::to_string(l), torch::nn::AnyModule(Tanh()));
  }
  return stack;
}

torch::Tensor linear_stack_input(int rank, int micro_batch, int step) {
  const int64_t in = linear_stack_shapes().front().first;
  const double shift = 10.0 * rank + 100.0 * micro_batch + 1000.0 * step;
  return torch::cos(torch::arange(kBatch * in, torch::kFloat) + shift).reshape({kBatch, in});
}

}  // namespace giant::parallel::test
