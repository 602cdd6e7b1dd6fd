#include "giant/train/local_executor.h"

#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include "giant/base/timer.h"
#include "giant/models/gpt.h"
#include "giant/parallel/data_parallel/gradient_sync.h"

namespace giant::train {

void zero_gradients(const StepParts& parts) {
  if (parts.reducer) {
    parts.reducer->zero_grad();
    return;
  }
  for (const auto& p : parts.parameters) p.mutable_grad().reset();
}

StepLoss LocalExecutor::train_step(int64_t step, double loss_scale, StepReport& report) {
  const int64_t micro_batches = parts_.batches->per_step();
  parts_.clock->reset();
  zero_gradients(parts_);
  double loss_sum = 0;
  for (int64_t m = 0; m < micro_batches; ++m) {
    MicroBatch batch;
    {
      RECORD_USER_SCOPE("giant::data");
      Stopwatch watch;
      batch = parts_.batches->train(step, m);
      report.data_s += watch.seconds();
    }
    torch::Tensor loss;
    {
      RECORD_USER_SCOPE("giant::forward");
      Stopwatch watch;
      loss = models::gpt_loss(model_->forward(batch.inputs), batch.targets, parts_.tp);
      report.forward_s += watch.seconds();
    }
    {
      RECORD_USER_SCOPE("giant::backward");
      Stopwatch watch;
      if (m == 0 && parts_.phases) parts_.phases->begin(FaultPhase::backward, step + 1);
      if (parts_.reducer) parts_.reducer->begin_micro_batch(m + 1 == micro_batches);
      const double factor = loss_scale / static_cast<double>(micro_batches);
      (factor != 1.0 ? loss * factor : loss).backward();
      report.backward_s += watch.seconds();
    }
    loss_sum += loss.item<double>();
  }
  StepLoss result;
  result.loss = loss_sum / static_cast<double>(micro_batches);
  if (parts_.reducer) {
    RECORD_USER_SCOPE("giant::gradient_wait");
    result.comm_wait_s = parts_.reducer->finish();
    report.backward_s += result.comm_wait_s;
  }
  result.comm_wait_s += parts_.clock->total();
  return result;
}

double LocalExecutor::evaluate(int64_t batches) {
  torch::NoGradGuard no_grad;
  double total = 0.0;
  for (int64_t b = 0; b < batches; ++b) {
    const MicroBatch batch = parts_.batches->validation(b);
    total += models::gpt_loss(model_->forward(batch.inputs), batch.targets, parts_.tp).item<double>();
  }
  return total / static_cast<double>(batches);
}

void LocalExecutor::set_training(bool training) { model_->train(training); }

}  // namespace giant::train
