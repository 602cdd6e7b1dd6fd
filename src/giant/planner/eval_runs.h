// Published training runs (tests/planner/data/published-runs.csv format):
// evaluate each published layout on its published cluster, measure the
// error, and fit the global efficiency constants (in-sample and leaving
// each source out). A row that cannot be evaluated (a bad cell, an unknown
// GPU, a layout that cannot run its model) is reported with the reason and
// leaves the other rows alone.
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "giant/base/statistics.h"  // median, for the errors
#include "giant/planner/cluster_spec.h"
#include "giant/planner/cost_model.h"
#include "giant/planner/efficiency_constants.h"
#include "giant/layout/layout.h"
#include "giant/planner/model_spec.h"

namespace giant::planner {

struct RunsTable {
  std::vector<std::string> comments;  // leading '#' lines, kept for the output
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // as read: a row may have more or fewer cells than the header
};

// Throws ConfigError for a file without a header or lacking a column
// published_runs reads; a bad row is left to published_run.
RunsTable parse_runs_csv(const std::string& text, const std::string& source = "csv");
RunsTable load_runs_csv(const std::string& path);

// One row, parsed. Missing cells are 0 / empty.
struct PublishedRun {
  size_t row = 0;  // 1-based, among the table's rows
  std::string source;
  ModelSpec model;
  ClusterSpec cluster;  // built from the row's gpu, memory and link columns
  LayoutFilter layout;  // tp, pp, dp, zero, recompute, micro_batch when given
  std::optional<double> iter_s;
  std::optional<double> tflops_per_gpu;
  bool full_recompute = false;
  // How the run's ZeRO ran: the optional `engine` column (deepspeed, or
  // empty / giant for giant's engine).
  ZeroEngine engine;
};
// Row r (0-based) of the table; throws ConfigError naming the row and the
// cell when it cannot be read.
PublishedRun published_run(const RunsTable& table, size_t r);
// Every row; throws at the first that cannot be read.
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
// Throws ConfigError naming the row when no layout of the published tp, pp
// and dp can run the model.
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

// One row of the table under the built-in constants: its run and
// prediction, or no prediction and why not. note also carries a caveat of a
// prediction (no layout fits in memory).
struct RowEvaluation {
  std::optional<PublishedRun> run;
  std::optional<RunPrediction> prediction;
  std::string note;
};
std::vector<RowEvaluation> evaluate_rows(const RunsTable& table);

// The rows again with pred_iter_s, pred_tflops_per_gpu and note added (the
// predictions empty where a row has none), each row as wide as the header.
void write_predictions_csv(const RunsTable& table, const std::vector<RowEvaluation>& rows, std::ostream& out);

}  // namespace giant::planner
