// The predicted step of one layout: compute, tensor-parallel collectives,
// the simulated pipeline with its transfers, data-parallel (or ZeRO)
// communication left after overlap with backward, and the optimizer.
#pragma once

#include <optional>
#include <string>

#include "giant/planner/cluster_spec.h"
#include "giant/layout/layout.h"
#include "giant/planner/memory_model.h"
#include "giant/planner/model_spec.h"
#include "giant/planner/run_precision.h"
#include "giant/planner/schedule_simulate.h"

namespace giant::planner {

struct StepBreakdown {
  double step_s = 0;
  double compute_s = 0;     // busiest device's own compute
  double tp_comm_s = 0;     // tensor-parallel collectives (on the critical path)
  double bubble_s = 0;      // pipeline idle time
  double pp_comm_s = 0;     // pipeline transfers not hidden by the schedule
  double dp_comm_s = 0;     // gradient sync (and ZeRO-3 gathers) not hidden by compute
  double optimizer_s = 0;
};

struct Estimate {
  Layout layout;
  RunPrecision precision;
  StepBreakdown time;
  MemoryBreakdown memory;
  double usable_memory_bytes = 0;
  bool fits = false;
  double samples_per_s = 0;
  double model_tflops_per_device = 0;  // 72-formula FLOPs (no recomputation) per second
  double mfu = 0;                      // model_tflops_per_device / peak in the compute precision
  bool simulated = false;              // pipeline simulated, not the closed form
};

struct CostOptions {
  bool simulate_pipeline = true;
  // The dtypes the run trains in; unset: the cluster's [device] dtype throughout.
  std::optional<RunPrecision> precision;
  ZeroEngine engine;  // how ZeRO runs: Giant's engine (parallel.* keys) or DeepSpeed's
};

// `cluster` must be resolved (ClusterSpec::resolved) and the layout valid
// for the model (why_invalid empty, planner/model_layout.h).
Estimate estimate_layout(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout,
                         const CostOptions& options = {});

// What the layout's pipeline simulation runs on: each stage's forward and
// backward per micro-batch (compute, its tensor-parallel collectives and
// ZeRO-3 gathers where they are longer) and one transfer between stages.
// Same preconditions as estimate_layout.
ActionCosts pipeline_action_costs(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout,
                                  const CostOptions& options = {});

}  // namespace giant::planner
