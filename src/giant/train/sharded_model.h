// ZeRO stage 3 in the trainer: this rank's stages sharded over the dp group
// (parallel.zero = 3), and whole parameters for what reads them outside the
// layers' own forward (generation, tests).
#pragma once

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/ccl/communicator.h"
#include "giant/parallel/data_parallel/gradient_sync.h"
#include "giant/parallel/data_parallel/sharded_parameters.h"
#include "giant/train/run_config.h"
#include "giant/train/stage_model.h"

namespace giant::train {

// ShardedParameters over `comm` (the dp group's gradient communicator) with
// parallel.zero3_prefetch, parallel.zero3_regather and train.grad_dtype. The
// tied embedding is a unit of its own: across stages so both holders shard
// it alike, within one stage because the head reads it after the layers
// between (it stays gathered from the embedding's forward to its backward).
std::unique_ptr<parallel::ShardedParameters> build_sharded_parameters(const RunConfig& config, StageModel& model,
                                                                      ccl::Communicator& comm,
                                                                      double* wait_seconds);

// While alive, every parameter is gathered at ZeRO-3 (collective: every dp
// rank makes one together); nothing happens at other stages.
class WholeParameters {
 public:
  explicit WholeParameters(parallel::GradientSync* sync);
  ~WholeParameters();
  WholeParameters(const WholeParameters&) = delete;
  WholeParameters& operator=(const WholeParameters&) = delete;

 private:
  parallel::ShardedParameters* sharded_;
};

}  // namespace giant::train
