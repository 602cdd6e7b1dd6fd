#include "giant/train/pipeline_step.h"

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "giant/base/timer.h"
#include "giant/ccl/communicator.h"
#include "giant/models/gpt.h"
#include "giant/parallel/data_parallel/gradient_sync.h"
#include "giant/parallel/tensor_collectives.h"
#include "giant/train/precision_choice.h"
#include "giant/train/run_device.h"

namespace giant::train {

PipelineShape pipeline_shape_of(const RunConfig& config) {
  const PipelineShape shape = pipeline_shape(config.layout, config.layout.micro_batches(config.train.global_batch));
  check_pipeline_shape(shape);
  return shape;
}

PipelineStepExecutor::PipelineStepExecutor(const RunConfig& config, StepParts parts, ccl::Communicator& pp,
                                           std::vector<int> stages, std::vector<parallel::LayerStack> chunks,
                                           TiedGradients tied)
    : parts_(std::move(parts)),
      pp_(pp),
      shape_(pipeline_shape_of(config)),
      schedule_(lower_communication(generate_schedule(shape_))),
      last_backward_(last_backward_micro_batch(schedule_.ranks.at(static_cast<size_t>(pp.rank())))),
      stages_(std::move(stages)),
      chunks_(std::move(chunks)),
      tied_(std::move(tied)),
      activation_options_(
          torch::TensorOptions().dtype(scalar_type_of(config.train.precision)).device(run_device(config.train))),
      micro_batch_(config.layout.micro_batch),
      seq_len_(config.model.seq_len),
      hidden_(config.model.hidden) {
  validate_schedule(schedule_);
  std::vector<parallel::PipelineChunk> pipeline_chunks;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    parallel::LayerStack stack = chunks_[c];
    pipeline_chunks.push_back({stages_[c], [stack](const at::Tensor& x) mutable { return stack->forward(x); }});
    if (stages_[c] == shape_.stages() - 1) holds_loss_ = true;
  }
  executor_ = std::make_unique<parallel::PipelineExecutor>(pp, std::move(pipeline_chunks));
}

std::vector<int64_t> PipelineStepExecutor::activation_shape() const { return {micro_batch_, seq_len_, hidden_}; }

StepLoss PipelineStepExecutor::train_step(int64_t step, double loss_scale, StepReport& report) {
  const int64_t micro_batches = shape_.micro_batches;
  parts_.clock->reset();
  zero_gradients(parts_);
  parallel::PipelineStepFunctions functions;
  double data_s = 0, targets_s = 0;  // the targets are read inside the executor's forward time
  functions.input = [&](int64_t m) {
    Stopwatch watch;
    at::Tensor inputs = parts_.batches->train(step, m).inputs;
    data_s += watch.seconds();
    return inputs;
  };
  functions.loss = [&](int64_t m, const at::Tensor& logits) {
    Stopwatch watch;
    at::Tensor targets = parts_.batches->train(step, m).targets;
    targets_s += watch.seconds();
    return models::gpt_loss(logits, targets, parts_.tp);
  };
  functions.before_backward = [&](int stage, int64_t m) {
    if (parts_.phases) parts_.phases->begin(FaultPhase::backward, step + 1);  // the rank's first backward fires it
    // Not m + 1 == M: GPipe's last backward is micro-batch 0's.
    if (parts_.reducer) parts_.reducer->begin_micro_batch(last_backward_.at(stage) == m);
  };
  parallel::PipelineStepResult result;
  {
    RECORD_USER_SCOPE("giant::pipeline");
    result = executor_->run(schedule_, functions, activation_shape(), activation_options_,
                            loss_scale / static_cast<double>(micro_batches));
  }
  report.data_s += data_s + targets_s;
  report.forward_s += result.forward_s - targets_s;
  report.backward_s += result.backward_s;
  StepLoss loss;
  loss.loss = holds_loss_ ? result.loss_sum / static_cast<double>(micro_batches) : 0.0;
  loss.comm_wait_s = result.wait_s;
  if (parts_.reducer) {
    RECORD_USER_SCOPE("giant::gradient_wait");
    const double waited = parts_.reducer->finish();
    loss.comm_wait_s += waited;
    report.backward_s += waited;
  }
  if (tied_.comm != nullptr) {
    RECORD_USER_SCOPE("giant::tied_gradient");
    Stopwatch watch;
    for (at::Tensor& grad : tied_.tensors()) parallel::allreduce_(grad, *tied_.comm);
    loss.comm_wait_s += watch.seconds();
    report.backward_s += watch.seconds();
  }
  loss.comm_wait_s += parts_.clock->total();
  return loss;
}

double PipelineStepExecutor::evaluate(int64_t batches) {
  PipelineShape shape = shape_;
  shape.micro_batches = batches;
  const PipelineSchedule forward_only = lower_communication(generate_forward_only(shape));
  parallel::PipelineStepFunctions functions;
  functions.input = [&](int64_t b) { return parts_.batches->validation(b).inputs; };
  functions.loss = [&](int64_t b, const at::Tensor& logits) {
    return models::gpt_loss(logits, parts_.batches->validation(b).targets, parts_.tp);
  };
  const parallel::PipelineStepResult result =
      executor_->run(forward_only, functions, activation_shape(), activation_options_);
  return holds_loss_ ? result.loss_sum / static_cast<double>(batches) : 0.0;
}

NextLogits PipelineStepExecutor::next_logits(int64_t padded_vocab) {
  PipelineShape shape = shape_;
  shape.micro_batches = 1;
  auto forward_only = std::make_shared<const PipelineSchedule>(lower_communication(generate_forward_only(shape)));
  return [this, padded_vocab, forward_only](const at::Tensor& context) {
    at::Tensor logits = torch::zeros({padded_vocab}, torch::kFloat);
    parallel::PipelineStepFunctions functions;
    functions.input = [&](int64_t) { return context.to(activation_options_.device()); };
    functions.loss = [&](int64_t, const at::Tensor& output) {
      at::Tensor last = output.select(1, context.size(1) - 1)[0];
      if (parts_.tp.size > 1) last = parallel::gather_from_region(last, *parts_.tp.comm, 0);
      logits.copy_(last);
      return torch::zeros({});
    };
    executor_->run(*forward_only, functions, {1, context.size(1), hidden_}, activation_options_);
    parallel::allreduce_(logits, pp_);  // the other stages add zeros: exact
    return logits;
  };
}

void PipelineStepExecutor::set_training(bool training) {
  for (auto& chunk : chunks_) chunk->train(training);
}

}  // namespace giant::train
