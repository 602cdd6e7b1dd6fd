// parallel.auto: the planner picks dp, tp, pp, the schedule and the
// micro-batch for the ranks started, on the cluster described by
// parallel.cluster (a file written by `giant plan --calibrate`), among the
// layouts this trainer runs with the ZeRO stage and recomputation as set,
// costed in train.precision (already resolved from auto) and
// train.grad_dtype.
#pragma once

#include <string>

#include "giant/train/run_config.h"

namespace giant::train {

// Sets config.layout to the choice, clears
// parallel.automatic, and returns one line saying what was chosen, in which
// precision, and why (with a note when the file has no rates for it).
// ConfigError naming the key when it cannot (no cluster file, a cluster of
// another size, no layout that fits).
std::string choose_layout(RunConfig& config, int world_size);

}  // namespace giant::train
