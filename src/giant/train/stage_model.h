// This rank's part of the model: the stages it holds (all of the model
// without a pipeline), each a stack of layers built from the layer list,
// and the stage bounds of parallel.partition.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "giant/parallel/layer_list.h"
#include "giant/planner/partition.h"
#include "giant/train/run_config.h"

namespace giant::train {

struct StageModel {
  std::vector<int> stages;                   // this rank's, in chunk order
  std::vector<parallel::LayerStack> chunks;  // one per stage
  planner::StageBounds bounds;               // every stage's layers
  std::vector<at::Tensor> parameters;        // chunk by chunk, layer by layer
  std::vector<std::string> names;
  // The tied embedding weight's index in `parameters` when this rank holds
  // it on one pipeline stage and its other holder is on another (-1: not).
  int tied_index = -1;
  bool tied_copy = false;  // that weight is the head's copy (counted once, by the embedding)
};

// The run's layer list: the GPT of model.*, its blocks recomputing as
// train.recompute says.
parallel::LayerList run_layer_list(const RunConfig& config);

// The stage bounds of the run's layer list (ConfigError naming
// parallel.partition or parallel.pp when it cannot be cut).
planner::StageBounds partition_stages(const RunConfig& config, const parallel::LayerList& layers);

// Builds the stages of pp rank `pp_rank` in fp32 on `device`, seeded by
// train.seed (drawn on the host: the same values on every device).
StageModel build_stage_model(const RunConfig& config, const parallel::LayerList& layers, int pp_rank,
                             const parallel::TensorParallelGroup& tp,
                             c10::Device device = c10::Device(c10::DeviceType::CPU));

// One line per stage: its rank, layers and parameter count (of the unsplit layers).
std::vector<std::string> describe_stages(const RunConfig& config, const parallel::LayerList& layers,
                                         const planner::StageBounds& bounds);

}  // namespace giant::train
