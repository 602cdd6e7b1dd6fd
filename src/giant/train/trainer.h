// The training loop of one process: data, forward and backward over the
// micro-batches, the non-finite guard, clipping, AdamW, evaluation, metrics,
// progress, an optional trace, and a sample of text at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "giant/train/matmul_rate.h"
#include "giant/train/memory_use.h"
#include "giant/train/run_config.h"

namespace at {
class Tensor;
}
namespace giant::ccl {
class Communicator;
}
namespace giant::optim {
class AdamW;
}

namespace giant::train {

struct TrainHooks {
  // Called after the backward passes of a step, before the guard looks at the
  // gradients (tests inject non-finite values here), with each parameter's
  // gradient as the update will read it (with mixed precision, in
  // train.grad_dtype, multiplied by the loss scale when there is one). With
  // parallel.zero=1 (the default) and dp > 1 only the rank's own blocks hold
  // the average over the replicas. With parallel.zero=2 or 3 and dp > 1
  // they are instead the gradients of the stretches this rank updates
  // (updated_tensors()' order), since no whole gradient outlives its reduction.
  std::function<void(int64_t step, const std::vector<at::Tensor>& gradients)> after_backward;
  // Polled after each step: a signal number asks the run to stop there
  // (every rank stops after the same step, which any rank's request
  // decides), save a checkpoint and return; 0 goes on.
  std::function<int()> stop_signal;
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t skipped_steps = 0;  // non-finite steps and loss-scale overflows
  int stop_signal = 0;         // what stopped the run before train.steps (TrainHooks::stop_signal); 0: none
  int64_t last_step = 0;       // the steps done when the run ended (a checkpoint holds them)
  std::string precision;       // what the model computed in (MFU's reference too)
  double final_loss_scale = 0;  // 0: no loss scaling
  double first_loss = 0, last_loss = 0;
  double val_loss = 0;  // at the end, nats per token
  double tokens_per_s_median = 0;
  double mfu_median = 0;
  double step_s_median = 0;
  double comm_wait_s_median = 0;  // per step, blocked in communication
  double matmul_flops = 0;        // MFU's reference rate, per rank, in `precision` (measured once, alone)
  double model_flops_per_step = 0;
  double seconds = 0;
  std::string sample;
  MemoryUse memory_peak;  // this rank's, each kind at its most over the steps run
};

// ConfigError naming the key when the layout does not fit the world or the
// model (dp x pp x tp against the ranks started, heads, MLP width or padded
// vocabulary not divisible by tp, features not available yet).
void check_layout(const RunConfig& config, int world_size);

class Trainer {
 public:
  // Checks everything that can be checked before work starts (layout against
  // the world, the model against tp, data file, tokenizer, sequence length
  // against the data, output directory): errors name the key or the file.
  // With a world of several ranks it then builds the mesh (collective) and
  // this rank's part of the model; only world rank 0 writes output.
  // `config_toml` is saved as out_dir/config.toml. `rates`: the run's
  // matrix-product rates when the caller measured them already
  // (measure_matrix_rates); else the trainer measures them (collective).
  Trainer(RunConfig config, std::string config_toml, std::ostream& out, bool live_progress,
          TrainHooks hooks = {}, std::shared_ptr<ccl::Communicator> world = nullptr,
          std::optional<MatrixRates> rates = std::nullopt);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  TrainSummary run();

  // This rank's parameters and their names (valid after construction), in
  // the order the hooks see them.
  std::vector<at::Tensor> parameters() const;
  std::vector<std::string> parameter_names() const;
  // Copies of this rank's parameters, whole: at parallel.zero=3, where only
  // a layer running holds its whole parameters, gathered over the dp group
  // (collective: every dp rank calls it together).
  std::vector<at::Tensor> whole_parameters() const;
  // The optimizer, and what it updates: the parameters in fp32, or with
  // mixed precision their fp32 masters (with a sharded optimizer, this
  // rank's stretches of them).
  const optim::AdamW& optimizer() const;
  std::vector<at::Tensor> updated_tensors() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace giant::train
