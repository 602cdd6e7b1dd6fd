// What `giant plan` prints: plan tables, JSON, the reason the winner beats
// the runner-up, the "fits nowhere" explanation, and the baseline comparison.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "giant/planner/cluster_spec.h"
#include "giant/planner/cost_model.h"
#include "giant/planner/model_spec.h"
#include "giant/planner/run_precision.h"
#include "giant/planner/search.h"

namespace giant::planner {

// The model, the cluster (its rates in the run's compute precision) and the
// precision, with a note when the cluster file has no rates for it.
void print_plan_header(const ModelSpec& model, const ClusterSpec& cluster, const RunPrecision& precision,
                       std::ostream& out);
void print_plan_table(const std::vector<Estimate>& plans, std::ostream& out);
void print_plans_json(const ModelSpec& model, const ClusterSpec& cluster, const SearchResult& result,
                      std::ostream& out);
// The plan's pipeline schedule as a time x rank grid (render_schedule_grid),
// each stage's forward, backward and transfer as the cost model predicts
// them, with the activations each stage keeps at most.
void print_plan_schedule(const ModelSpec& model, const ClusterSpec& cluster, const Estimate& plan, std::ostream& out);
// One line per component that differs, largest first: "the winner spends
// 1.2 s less in the bubble (tp=8 pp=4: 1.0 s, tp=4 pp=8: 2.2 s) ...".
std::string explain_choice(const Estimate& winner, const Estimate& runner_up);
// The least memory any layout reaches, what it is made of, and what would
// make the model fit (more hosts, bigger devices).
std::string explain_fits_nowhere(const ModelSpec& model, const ClusterSpec& cluster, const SearchResult& result);

// The chosen plan beside Megatron-style tp=4 pp=4 and ZeRO-3 data
// parallelism, each on the cluster's transport and on the other one.
void print_baseline_comparison(const ModelSpec& model, const ClusterSpec& cluster, const RunPrecision& precision,
                               std::ostream& out);

}  // namespace giant::planner
