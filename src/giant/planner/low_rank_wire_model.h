// What a low-rank gradient wire (parallel.grad_wire = powersgd:R) sends and
// costs: each weight matrix of a stage (rows x cols, tensor-parallel shard)
// as two factors, R rows + R cols elements, where that is at least 2x
// fewer (as the trainer's wire decides), else whole, as the vectors go.
// The trainer averages them in two allreduces over the data-parallel group
// once backward is done (nothing of it hides behind backward).
#pragma once

#include "giant/layout/layout.h"
#include "giant/planner/cluster_spec.h"
#include "giant/planner/comm_model.h"
#include "giant/planner/model_spec.h"

namespace giant::planner {

struct LowRankWireElements {
  double p = 0;  // the first allreduce: the left factors and the parameters sent whole
  double q = 0;  // the second: the right factors
};
LowRankWireElements low_rank_wire_elements(const ModelSpec& model, const Layout& layout, int stage, int rank);

// The slowest stage's two allreduces over its data-parallel group, plus the
// products and residual passes over its gradients.
double low_rank_wire_seconds(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout,
                             const GroupLink& dp_group);

}  // namespace giant::planner
