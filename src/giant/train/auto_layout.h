// parallel.auto: the planner picks dp, tp, pp, the schedule and the
// micro-batch for the ranks started, on the cluster described by
// parallel.cluster (a file written by `giant plan --calibrate`) or, without
// one, measured by giant train (cluster_probe.h), among the
// layouts this trainer runs with the ZeRO stage and recomputation as set,
// costed in train.precision (already resolved from auto) and
// train.grad_dtype.
#pragma once

#include <string>

#include "giant/planner/cluster_spec.h"
#include "giant/train/run_config.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::train {

// parallel.cluster's file as config.parallel.known_cluster: a ConfigError
// naming the key when it is empty, unreadable or of another size than the
// world. Without parallel.auto the run then only costs ccl's algorithms on
// its links.
void read_cluster_file(RunConfig& config, int world_size);

// Sets config.layout to the choice and parallel.known_cluster to the
// cluster chosen on, clears parallel.automatic, and returns one line saying
// what was chosen, in which precision, and why (with a note when the file
// has no rates for it), followed by the best three candidates as `giant
// plan` tabulates them.
// ConfigError naming the key when it cannot (no cluster file, a cluster of
// another size, no layout that fits).
std::string choose_layout(RunConfig& config, int world_size);

// parallel.auto without parallel.cluster: measures the cluster the ranks run
// on (collective over world; null: this process alone), writes it to
// <train.out_dir>/cluster.toml (rank 0) and chooses on it. Returns the
// measurement's line and the choice's lines.
std::string measure_and_choose_layout(RunConfig& config, ccl::Communicator* world);

// The same on a cluster given (measured), named `source` in the line.
std::string choose_layout_on(RunConfig& config, const planner::ClusterSpec& cluster, const std::string& source);

}  // namespace giant::train
