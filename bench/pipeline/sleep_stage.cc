#include "sleep_stage.h"

#include <chrono>
#include <thread>

#include <torch/torch.h>

namespace giant::bench::pipeline {
namespace {

void sleep_seconds(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

struct SleepFunction : torch::autograd::Function<SleepFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            double forward_s, double backward_s) {
    ctx->saved_data["backward_s"] = backward_s;
    ctx->saved_data["weight_sizes"] = weight.sizes();
    sleep_seconds(forward_s);
    return input.clone();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list output_grads) {
    sleep_seconds(ctx->saved_data["backward_s"].toDouble());
    at::Tensor weight_grad = torch::zeros(ctx->saved_data["weight_sizes"].toIntVector());
    // One gradient per input of forward: none for the two durations.
    return {output_grads[0].clone(), weight_grad, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

parallel::PipelineChunk sleep_stage(int stage, double forward_s, double backward_s) {
  at::Tensor weight = torch::zeros({1}, torch::requires_grad());
  return {stage, [weight, forward_s, backward_s](const at::Tensor& input) {
            return SleepFunction::apply(input, weight, forward_s, backward_s);
          }};
}

}  // namespace giant::bench::pipeline
