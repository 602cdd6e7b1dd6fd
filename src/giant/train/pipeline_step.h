// The step of one pipeline rank: its stages' forwards and backwards in the
// order of the run's schedule (layout/schedule.h), run by
// parallel::PipelineExecutor; then the tied embedding's gradient is summed
// between the first and the last stage.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "giant/layout/schedule.h"
#include "giant/parallel/pipeline/executor.h"
#include "giant/train/generate.h"
#include "giant/train/run_config.h"
#include "giant/train/step_executor.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::train {

// The tied weight's gradients on a rank holding the embedding or the head's
// copy of it, and the communicator of the two holders.
struct TiedGradients {
  ccl::Communicator* comm = nullptr;  // null: this rank holds no tied weight
  // Called after the reducer finished: the tensors to sum (the whole
  // gradient, or with a sharded optimizer this rank's stretches of it).
  std::function<std::vector<at::Tensor>()> tensors;
};

class PipelineStepExecutor : public StepExecutor {
 public:
  // `stages` and `chunks` are this rank's, in chunk order; `pp` the
  // pipeline group's communicator (for the executor alone).
  PipelineStepExecutor(const RunConfig& config, StepParts parts, ccl::Communicator& pp, std::vector<int> stages,
                       std::vector<parallel::LayerStack> chunks, TiedGradients tied);

  StepLoss train_step(int64_t step, double loss_scale, StepReport& report) override;
  double evaluate(int64_t batches) override;
  bool holds_loss() const override { return holds_loss_; }
  void set_training(bool training) override;

  const PipelineSchedule& schedule() const { return schedule_; }
  // The next-token logits of the whole pipeline (padded_vocab entries, on
  // every rank): a forward-only run of one sequence, the last stage's
  // logits gathered over tp and shared over the pipeline.
  NextLogits next_logits(int64_t padded_vocab);

 private:
  std::vector<int64_t> activation_shape() const;

  StepParts parts_;
  ccl::Communicator& pp_;
  PipelineShape shape_;
  PipelineSchedule schedule_;  // lowered
  // Each of this rank's stages' last backward in the schedule: the one
  // after which its gradient buckets may be reduced.
  std::map<int, int64_t> last_backward_;
  std::vector<int> stages_;
  std::vector<parallel::LayerStack> chunks_;
  std::unique_ptr<parallel::PipelineExecutor> executor_;
  TiedGradients tied_;
  at::TensorOptions activation_options_;
  int64_t micro_batch_, seq_len_, hidden_;
  bool holds_loss_ = false;
};

// The pipeline shape of a run (its schedule, pp, virtual stages and
// micro-batches per step), checked: ConfigError naming the key.
PipelineShape pipeline_shape_of(const RunConfig& config);

}  // namespace giant::train
