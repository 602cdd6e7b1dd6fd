#include "sleep_stage.h"

#include <chrono>
#include <thread>

#include <torch/torch.h>

#include "giant/base/timer.h"

namespace giant::bench::pipeline {
namespace {

void sleep_seconds(double seconds, SleepTally& tally) {
  if (seconds <= 0) return;
  Stopwatch watch;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  tally.slept_s += watch.seconds();
  tally.asked_s += seconds;
  ++tally.sleeps;
}

// The backward finds the tally through its address: autograd's saved data
// holds values, and the chunk keeps the tally alive (sleep_stage's contract).
SleepTally& tally_of(torch::autograd::AutogradContext* ctx) {
  return *reinterpret_cast<SleepTally*>(ctx->saved_data["tally"].toInt());
}

struct SleepFunction : torch::autograd::Function<SleepFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight,
                            double forward_s, double backward_s, int64_t tally) {
    ctx->saved_data["backward_s"] = backward_s;
    ctx->saved_data["weight_sizes"] = weight.sizes();
    ctx->saved_data["tally"] = tally;
    sleep_seconds(forward_s, tally_of(ctx));
    return input.clone();
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list output_grads) {
    sleep_seconds(ctx->saved_data["backward_s"].toDouble(), tally_of(ctx));
    at::Tensor weight_grad = torch::zeros(ctx->saved_data["weight_sizes"].toIntVector());
    // One gradient per input of forward: none for the durations and the tally.
    return {output_grads[0].clone(), weight_grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

parallel::PipelineChunk sleep_stage(int stage, double forward_s, double backward_s,
                                    std::shared_ptr<SleepTally> tally) {
  at::Tensor weight = torch::zeros({1}, torch::requires_grad());
  return {stage, [weight, forward_s, backward_s, tally](const at::Tensor& input) {
            return SleepFunction::apply(input, weight, forward_s, backward_s,
                                        reinterpret_cast<int64_t>(tally.get()));
          }};
}

}  // namespace giant::bench::pipeline
