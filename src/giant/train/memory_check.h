// Before training: whether the run fits the memory a rank may use, by the
// planner's memory model (model states per ZeRO stage and precision,
// activations per recomputation and schedule, logits, ZeRO's buffers), and
// what fits instead when it does not.
#pragma once

#include <string>

#include "giant/layout/layout.h"
#include "giant/planner/memory_model.h"
#include "giant/planner/model_spec.h"
#include "giant/planner/run_precision.h"
#include "giant/train/run_config.h"

namespace giant::train {

// What the planner sees of the run: its model, layout, dtypes and engine.
// planner_layout is RunConfig::layout as the planner states layouts (with
// pp = 1 the schedule is 1f1b; virtual stages are 1 unless interleaved).
planner::ModelSpec planner_model(const RunConfig& config);
Layout planner_layout(const RunConfig& config);
RunPrecision planner_precision(const RunConfig& config);  // train.precision must be resolved
planner::ZeroEngine planner_engine(const RunConfig& config);

struct MemoryCheck {
  planner::MemoryBreakdown predicted;  // the rank that needs the most
  double limit_bytes = 0;
  std::string limit_source;  // "train.memory_limit_gb" or what the device's limit is
  bool fits() const { return predicted.total() <= limit_bytes; }
};

// The prediction and the limit: train.memory_limit_gb GiB, or when 0 the
// memory of a resolved train.device = cuda:N (each rank has its own), or on
// the CPU the host's physical memory shared by the world's ranks (ranks of
// one host share it; the trainer does not know how many hosts there are, so
// all are counted: the conservative share).
MemoryCheck predict_rank_memory(const RunConfig& config, int world_size);

// The cheapest single change that fits, tried in this order (the cost each
// adds to a step, least first): a higher ZeRO stage (more communication),
// selective then full recomputation (more compute), a smaller micro-batch
// (smaller products), another tp x pp x dp split of the same ranks; then
// all of ZeRO-3, full recomputation and micro-batch 1 at once. Returns the
// setting ("parallel.zero = 3") and its key, or empty strings when none fits.
struct MemorySuggestion {
  std::string key, setting;
  double bytes = 0;
};
MemorySuggestion suggest_fitting_change(const RunConfig& config, int world_size, double limit_bytes);

// Throws ConfigError when the run is predicted not to fit: naming
// train.memory_limit_gb when it is set, else the key of the suggested
// change (when none fits, the model size key whose halving saves the
// most), with the prediction by kind, the limit, and a closing sentence
// naming the keys to change.
void check_memory_fits(const RunConfig& config, int world_size);

}  // namespace giant::train
