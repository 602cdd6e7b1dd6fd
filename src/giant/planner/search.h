// The search over layouts: every dp x tp x pp split of the cluster, micro-
// batch, schedule and interleave, ZeRO stage, recomputation, sequence
// parallel and placement, pruned by memory, ranked by predicted step time.
// By default only layouts `giant train` runs (why_train_cannot_run) are
// searched: what it ranks is what a run can be started with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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

// The wires `giant plan` and parallel.auto choose among. powersgd:R only
// when asked: its convergence cost (9-19% higher loss after 300 steps of the
// default model) is more than any step time we can weigh it against.
inline const std::vector<ccl::GradWire> kChosenGradWires = {ccl::GradWire::none, ccl::GradWire::bf16,
                                                           ccl::GradWire::int8, ccl::GradWire::int4};

// How much slower than predicted a layout ranks for its wire's loss: int4
// drops 9x more per step than int8 and ended 300 steps of the default model
// 1.6% above fp32 (int8: within 0.1%), about what 1.1-1.2x more steps buy
// at that point of a run, so it must save more than that to be chosen.
double wire_rank_factor(ccl::GradWire wire);

// The time a layout is ranked by: its predicted step time, times its wire's factor.
double ranked_step_seconds(const Estimate& e);

// A line for a ranked list whose order is not that of predicted step time
// (a faster layout ranked below for its wire's loss); "" when it is.
std::string ranking_note(const std::vector<Estimate>& ranked);

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
