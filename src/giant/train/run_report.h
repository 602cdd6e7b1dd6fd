// What a run reports as it goes, on the leader: the progress line, the
// skipped-step notes, metrics.jsonl and TensorBoard per step and per
// evaluation, and the medians of the summary (the first step, which pays
// for warm-up, left out when there are others).
#pragma once

#include <cstdint>
#include <vector>

#include "giant/train/metrics_log.h"
#include "giant/train/progress.h"
#include "giant/train/tensorboard_log.h"
#include "giant/train/trainer.h"

namespace giant::train {

class RunReporter {
 public:
  // metrics and tensorboard may be null (ranks other than the leader, or
  // train.tensorboard off).
  RunReporter(Progress& progress, MetricsLog* metrics, TensorBoardLog* tensorboard, int64_t total_steps)
      : progress_(progress), metrics_(metrics), tensorboard_(tensorboard), total_steps_(total_steps) {}

  // A finished step (its report filled in). `scale_after`: the loss scale
  // for the next step, when this one overflowed.
  void step(const StepReport& report, double comm_wait_s, bool overflowed, double scale_after);
  void evaluation(int64_t step, double train_loss, double val_loss, double elapsed_s);
  // Losses, medians and the memory peaks into the summary; prints the
  // memory peak line.
  void fill(TrainSummary& summary) const;

 private:
  Progress& progress_;
  MetricsLog* metrics_;
  TensorBoardLog* tensorboard_;
  int64_t total_steps_;
  double first_loss_ = 0, last_loss_ = 0;
  std::vector<double> tokens_per_s_, mfu_, step_seconds_, comm_waits_;
  bool memory_shown_ = false;  // the memory line after the run's first step
  MemoryUse memory_peak_;
};

}  // namespace giant::train
