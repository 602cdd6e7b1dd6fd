// The one place that runs a step's micro-batches: forward, loss and
// backward, with the data-parallel reduction finished when it returns. The
// local executor holds the whole model (today's loop); the pipeline
// executor one rank's stages. The loss lives where the last stage is.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/parallel/layer_list.h"
#include "giant/train/step_phases.h"
#include "giant/train/micro_batches.h"
#include "giant/train/progress.h"

namespace giant::parallel {
class GradientSync;
}

namespace giant::train {

// Seconds blocked in communication during a step, added to by the
// tensor-parallel layers and the sharded optimizer's parameter waits.
struct CommClock {
  double tensor_parallel_s = 0, parameter_wait_s = 0;
  void reset() { tensor_parallel_s = parameter_wait_s = 0; }
  double total() const { return tensor_parallel_s + parameter_wait_s; }
};

// What every executor works with (owned by the trainer).
struct StepParts {
  const MicroBatches* batches = nullptr;
  parallel::TensorParallelGroup tp;
  parallel::GradientSync* reducer = nullptr;       // null: the gradients stay in the parameters
  std::vector<at::Tensor> parameters;            // this rank's (zeroed when there is no reducer)
  CommClock* clock = nullptr;
  StepPhases* phases = nullptr;  // the executor begins the backward phase (train.fault, the hang watchdog)
};

struct StepLoss {
  double loss = 0;         // this rank's mean over its micro-batches (0 without the last stage)
  double comm_wait_s = 0;  // blocked in communication
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Forward and backward over this rank's micro-batches of `step`, each loss
  // multiplied by loss_scale / micro-batches before backward. Fills the
  // report's data, forward and backward times.
  virtual StepLoss train_step(int64_t step, double loss_scale, StepReport& report) = 0;
  // The mean validation loss over `batches` micro-batches (0 without the last stage).
  virtual double evaluate(int64_t batches) = 0;
  // Whether this rank computes the loss (holds the last stage).
  virtual bool holds_loss() const = 0;
  virtual void set_training(bool training) = 0;
};

// Zeroes the gradients for a new step: the reducer's, or the parameters' own.
void zero_gradients(const StepParts& parts);

}  // namespace giant::train
