// Published training runs (../shared/reference/published-runs.csv format):
// evaluate each published layout on its published cluster, measure the
// error, and fit the global efficiency constants (in-sample and leaving
// each source out).
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "giant/planner/cluster_spec.h"
#include "giant/planner/cost_model.h"
#include "giant/planner/efficiency_constants.h"
#include "giant/planner/layout.h"
#include "giant/planner/model_spec.h"

namespace giant::planner {

struct RunsTable {
  std::vector<std::string> comments;  // leading '#' lines, kept for the output
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

RunsTable parse_runs_csv(const std::string& text, const std::string& source = "csv");
RunsTable load_runs_csv(const std::string& path);

// One row, parsed. Missing cells are 0 / empty.
struct PublishedRun {
  std::string source;
  ModelSpec model;
  ClusterSpec cluster;  // built from the row's gpu, memory and link columns
  LayoutFilter layout;  // tp, pp, dp, zero, recompute, micro_batch when given
  std::optional<double> iter_s;
  std::optional<double> tflops_per_gpu;
  bool full_recompute = false;
};
std::vector<PublishedRun> published_runs(const RunsTable& table);

// Efficiency constants by device type; types not in the map use "*" if
// present, else the built-in defaults.
using ConstantsByType = std::map<std::string, EfficiencyConstants>;

struct RunPrediction {
  Estimate estimate;
  double iter_s = 0;
  double tflops_per_gpu = 0;  // counted as the sources count (header of the csv)
  bool memory_fits = true;    // false: no layout fits by the memory model; ranked regardless
  std::optional<double> relative_error;  // of iter_s, else of TFLOP/s
};
RunPrediction predict_run(const PublishedRun& run, const ConstantsByType& constants);
// The same with the layout fixed (no search): for fitting.
RunPrediction predict_run_layout(const PublishedRun& run, const Layout& layout, const ConstantsByType& constants);

struct ErrorReport {
  ConstantsByType fitted;                     // on all rows
  std::vector<double> in_sample_errors;       // per row (absolute, relative)
  std::vector<double> leave_one_out_errors;   // per row, constants fitted without its source
  std::map<std::string, ConstantsByType> fitted_without;  // by left-out source
  double in_sample_median = 0;
  double leave_one_out_median = 0;
};
ErrorReport fit_and_cross_validate(const std::vector<PublishedRun>& runs);
void print_error_report(const std::vector<PublishedRun>& runs, const ErrorReport& report, std::ostream& out);

// The rows again with pred_iter_s and pred_tflops_per_gpu added.
void write_predictions_csv(const RunsTable& table, const std::vector<RunPrediction>& predictions, std::ostream& out);

double median(std::vector<double> values);

}  // namespace giant::planner
