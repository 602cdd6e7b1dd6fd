// The step of a rank holding the whole model (dp and tp only): its
// micro-batches one after another.
#pragma once

#include "giant/train/step_executor.h"

namespace giant::train {

class LocalExecutor : public StepExecutor {
 public:
  LocalExecutor(StepParts parts, parallel::LayerStack model) : parts_(std::move(parts)), model_(std::move(model)) {}

  StepLoss train_step(int64_t step, double loss_scale, StepReport& report) override;
  double evaluate(int64_t batches) override;
  bool holds_loss() const override { return true; }
  void set_training(bool training) override;

 private:
  StepParts parts_;
  parallel::LayerStack model_;
};

}  // namespace giant::train
