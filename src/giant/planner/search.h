// The search over layouts: every dp x tp x pp split of the cluster, micro-
// batch, schedule and interleave, ZeRO stage, recomputation, sequence
// parallel and placement, pruned by memory, ranked by predicted step time.
// By default only layouts `giant train` runs (why_train_cannot_run) are
// searched: what it ranks is what a run can be started with.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "giant/planner/cluster_spec.h"
#include "giant/planner/cost_model.h"
#include "giant/layout/layout.h"
#include "giant/planner/model_spec.h"
#include "giant/planner/run_precision.h"

namespace giant::planner {

struct SearchOptions {
  LayoutFilter filter;        // fixed parts of the layout (--layout)
  int top = 5;                // plans returned
  int max_micro_batch = 64;
  int max_virtual_stages = 8;
  // false: also layouts only other systems run (sequence parallelism, any
  // placement), to cost published runs and baselines, never to recommend.
  bool train_runs_only = true;
  // The closed form ranks every fitting layout; this many of the best are
  // then simulated step by step and ranked again. 0 simulates all (brute force).
  int simulate_best = 256;
  // The dtypes the run trains in; unset: the cluster's [device] dtype throughout.
  std::optional<RunPrecision> precision;
  ZeroEngine engine;  // how ZeRO runs (memory and time): giant's parallel.* keys, or DeepSpeed's
  // Gradient wire formats tried where the data-parallel group crosses hosts
  // (ZeRO 0-2, fp32 gradients); elsewhere none, and the filter's when it fixes one.
  std::vector<ccl::GradWire> grad_wires = {ccl::GradWire::none};
};

// The wires `giant plan` and parallel.auto choose among: int4 only when
// asked, its error per step being 9x int8's, held back by error feedback
// alone; powersgd:R only when asked, its convergence cost (9-19% higher
// loss after 300 steps of the default model) being what no time weighs.
inline const std::vector<ccl::GradWire> kChosenGradWires = {ccl::GradWire::none, ccl::GradWire::bf16,
                                                           ccl::GradWire::int8};

struct SearchResult {
  RunPrecision precision;             // what the layouts were costed in
  std::vector<Estimate> best;         // fitting layouts, fastest first
  std::optional<Estimate> least_memory;  // over all valid layouts, fitting or not
  std::optional<Estimate> best_other_split;  // fastest with another tp x pp x dp than the winner
  int64_t valid_layouts = 0;
  int64_t fitting_layouts = 0;
  int64_t simulated_layouts = 0;
  double search_seconds = 0;
};

// `cluster` must be resolved. Layouts use all of its devices.
SearchResult search_layouts(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options);

// Every valid layout the search considers (for tests and brute force).
std::vector<Layout> enumerate_layouts(const ModelSpec& model, int devices, const SearchOptions& options);

// The best layout for a cluster and a model (what `parallel.auto = true` in
// the trainer runs, on its calibrated cluster file and in options.precision,
// its train.precision and train.grad_dtype). Throws giant::Error with the
// "fits nowhere" explanation when no layout fits.
Estimate best_layout(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options = {});
// The options.top best, fastest first (at least one; the same error as best_layout).
std::vector<Estimate> best_layouts(const ModelSpec& model, const ClusterSpec& cluster, const SearchOptions& options);

}  // namespace giant::planner
