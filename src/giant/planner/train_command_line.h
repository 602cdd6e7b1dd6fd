// The `giant train` command line that runs a plan, as `giant plan` prints
// it: the model and its batch as --set model.* and train.global_batch (so
// it trains the model planned, whichever preset or file named it), the
// layout as parallel.* with train.micro_batch and train.recompute, the
// dtypes as train.precision and train.grad_dtype; started alone for one
// device, under `giant launch` on one host, and under srun across hosts
// (giant launch starts ranks on its own machine only). No libtorch.
#pragma once

#include <string>
#include <vector>

#include "giant/planner/cluster_spec.h"
#include "giant/planner/cost_model.h"
#include "giant/planner/model_spec.h"

namespace giant::planner {

struct TrainCommandLine {
  std::string launcher;               // "", "giant launch --nproc 8 --" or "srun -N 4 --ntasks-per-node 8"
  std::vector<std::string> settings;  // "parallel.dp=4", ...: each given to giant train with --set
  std::string text() const;           // the whole line, ready for a shell
};

// `plan` must be a layout giant train runs (what the search returns).
TrainCommandLine train_command_line(const ModelSpec& model, const ClusterSpec& cluster, const Estimate& plan);

}  // namespace giant::planner
