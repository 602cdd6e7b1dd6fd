// This rank's model and what updates it: the stage model, the data-parallel
// engine that reduces its gradients, and the optimizer over the pieces that
// engine hands it (whole parameters or this rank's stretches of them,
// whatever the ZeRO stage), with fp32 masters under mixed precision and the
// dynamic loss scaler.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/optim/adamw.h"
#include "giant/optim/loss_scaler.h"
#include "giant/optim/master_weights.h"
#include "giant/parallel/data_parallel/gradient_sync.h"
#include "giant/train/progress.h"
#include "giant/train/run_config.h"
#include "giant/train/run_topology.h"
#include "giant/train/stage_model.h"
#include "giant/train/step_executor.h"

namespace giant::train {

struct ModelState {
  StageModel model;
  std::vector<bool> is_shard;  // per parameter: a tensor-parallel shard
  // Null: one replica in fp32 (the gradients stay in the parameters). ZeRO
  // 0-2: a GradientReducer; 3: ShardedParameters.
  std::unique_ptr<parallel::GradientSync> sync;
  std::vector<parallel::UpdatePiece> pieces;  // what the update reads and writes, in the compute dtype
  std::unique_ptr<optim::MasterWeights> masters;  // mixed precision only
  // What AdamW updates: the pieces' tensors, or with mixed precision their
  // fp32 masters (the pieces' order).
  std::vector<at::Tensor> updated;
  // What the gradient norm counts: `updated` less the tied head copy, and
  // whether each is a tensor-parallel shard.
  struct NormTensors {
    std::vector<at::Tensor> tensors;
    std::vector<bool> is_shard;
  } norm;
  std::unique_ptr<optim::AdamW> optimizer;
  std::optional<optim::LossScaler> loss_scaler;

  const std::vector<at::Tensor>& parameters() const { return model.parameters; }
  // Each gradient as the update reads it (valid after backward): see
  // TrainHooks::after_backward.
  std::vector<at::Tensor> gradients() const;
  // The tied weight's gradient as this rank's update reads it.
  std::vector<at::Tensor> tied_gradients() const;
};

// Builds this rank's stages (drawn in fp32 whatever the precision, then cast
// to the compute dtype), the data-parallel engine parallel.dp and
// parallel.zero ask for (its parameter waits counted in clock), and the
// optimizer. Describes the stages under a pipeline.
std::unique_ptr<ModelState> build_model_state(const RunConfig& config, const RunTopology& topology, CommClock& clock,
                                              Progress& progress);

}  // namespace giant::train
