#include "giant/planner/plan_command.h"

#include <CLI/CLI.hpp>

#include <charconv>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "giant/base/error.h"
#include "giant/planner/eval_runs.h"
#include "giant/planner/plan_report.h"
#include "giant/planner/search.h"
#include "giant/planner/spec_toml.h"
#include "giant/planner/train_command_line.h"

namespace giant::planner {

namespace {

// A whole number of at least 1, said plainly (CLI11's PositiveNumber quotes
// the range of a double, 300 digits long).
CLI::Validator at_least_one() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        long long value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || error != std::errc() || end != text.data() + text.size())
          return "expected a whole number, got '" + text + "'";
        if (value < 1) return "must be at least 1, got " + text;
        return "";
      },
      "N >= 1");
}

void list_presets(std::ostream& out) {
  out << "models:";
  for (const auto& n : model_preset_names()) out << " " << n;
  out << "\nclusters:";
  for (const auto& n : cluster_preset_names()) out << " " << n;
  out << "\n";
}

// Every row it can, each other one with its note; --report-error counts
// those apart and measures the error over the rest.
int run_eval_csv(const PlanArgs& a, std::ostream& out, std::ostream& err) {
  const RunsTable table = load_runs_csv(a.eval_csv);
  const std::vector<RowEvaluation> rows = evaluate_rows(table);
  write_predictions_csv(table, rows, out);
  std::vector<PublishedRun> runs;
  std::vector<double> errors;
  for (const auto& row : rows) {
    if (!row.prediction) continue;
    runs.push_back(*row.run);
    if (row.prediction->relative_error) errors.push_back(*row.prediction->relative_error);
  }
  const size_t skipped = rows.size() - runs.size();
  if (skipped > 0)
    err << "giant plan: " << skipped << " of " << rows.size() << " rows could not be evaluated (see their note)\n";
  if (a.report_error) {
    out << "# rows not evaluated: " << skipped << " (see the note column); errors are over the other "
        << runs.size() << "\n";
    if (!runs.empty()) {
      out << "# built-in constants: median_abs_error=" << std::fixed << std::setprecision(1) << 100 * median(errors)
          << "% over " << errors.size() << " rows\n"
          << std::defaultfloat;
      print_error_report(runs, fit_and_cross_validate(runs), out);
    }
  }
  return runs.empty() && !rows.empty() ? 1 : 0;
}

int run_calibrate(const PlanArgs& a, std::ostream& out, const CalibrationProbes& probes) {
  CalibrationOptions options;
  options.devices = a.devices;
  std::ostringstream log;
  const ClusterSpec cluster = calibrate_this_machine(probes, options, log);
  out << log.str();
  return write_cluster_file(cluster,
                            "written by giant plan --calibrate: rates of one device while all " +
                                std::to_string(cluster.devices_per_host) +
                                " devices of the host work (plan one process alone with --devices 1)",
                            a.out_file, out);
}

}  // namespace

int write_cluster_file(const ClusterSpec& cluster, const std::string& comment, const std::string& out_file,
                       std::ostream& out) {
  const std::string toml = "# " + comment + "\n" + cluster_to_toml(cluster);
  if (out_file.empty()) {
    out << toml;
    return 0;
  }
  std::ofstream file(out_file);
  if (!file) throw ConfigError("--out", "cannot write '" + out_file + "'");
  file << toml;
  out << "wrote " << out_file << "\n";
  return 0;
}

namespace {

Precision precision_flag(const std::string& flag, const std::string& value) {
  if (const auto p = parse_precision(value)) return *p;
  throw ConfigError(flag, "expected fp32, bf16 or fp16, got '" + value + "'");
}

// --precision, else the dtype of the cluster's [device] rates; gradients
// as --grad-dtype, else in the compute precision.
RunPrecision precision_from_flags(const PlanArgs& a, const DeviceSpec& device) {
  RunPrecision p = default_run_precision(device);
  if (!a.precision.empty()) p.compute = p.gradients = precision_flag("--precision", a.precision);
  if (!a.grad_dtype.empty()) p.gradients = precision_flag("--grad-dtype", a.grad_dtype);
  return p;
}

int run_plan(const PlanArgs& a, std::ostream& out, std::ostream& err) {
  if (a.model.empty()) throw ConfigError("--model", "is required (a preset name or a TOML file)");
  if (a.cluster.empty()) throw ConfigError("--cluster", "is required (a preset name or a TOML file)");
  const ModelSpec model = model_from_argument(a.model);
  ClusterSpec cluster = cluster_from_argument(a.cluster);
  if (a.hosts > 0) cluster.hosts = a.hosts;
  cluster.validate();
  cluster = cluster.resolved();
  const RunPrecision precision = precision_from_flags(a, cluster.device);
  if (a.print_specs) {
    out << model_to_toml(model) << "\n" << cluster_to_toml(cluster);
    return 0;
  }
  if (a.compare_baselines) {
    print_plan_header(model, cluster, precision, out);
    print_baseline_comparison(model, cluster, precision, out);
    return 0;
  }
  SearchOptions options;
  options.top = a.top;
  options.max_micro_batch = a.max_micro_batch;
  options.precision = precision;
  options.grad_wires = kChosenGradWires;
  if (a.simulate_all) options.simulate_best = 0;
  if (!a.layout.empty()) {
    options.filter = parse_layout_filter(a.layout);
    if (options.filter.sequence_parallel.value_or(false))
      throw ConfigError("--layout sp", "giant train has no sequence parallelism, and giant plan ranks only layouts it "
                                       "runs (--eval-csv costs other systems' layouts)");
    // A layout the search could never produce gets its own reason.
    Layout probe;
    const LayoutFilter& f = options.filter;
    probe.tp = f.tp.value_or(1), probe.pp = f.pp.value_or(1), probe.dp = f.dp.value_or(1);
    if (f.tp && f.pp && f.dp && probe.devices() != cluster.devices())
      throw ConfigError("--layout", "tp x pp x dp = " + std::to_string(probe.devices()) + " but cluster " +
                                        cluster.name + " has " + std::to_string(cluster.devices()) + " devices");
  }
  if (a.show_schedule && a.json) throw ConfigError("--show-schedule", "draws a text grid: leave out --json");
  const SearchResult result = search_layouts(model, cluster, options);
  if (a.json) {
    print_plans_json(model, cluster, result, out);
    return result.best.empty() ? 1 : 0;
  }
  print_plan_header(model, cluster, precision, out);
  if (result.best.empty()) {
    if (result.valid_layouts == 0)
      err << "giant plan: no valid layout matches" << (a.layout.empty() ? "" : " --layout " + a.layout)
          << " (tp must divide heads and ffn, pp x v the layers, dp x mb the global batch; and giant train must run "
             "it: placement "
          << Layout{}.placement() << ", no sequence parallelism)\n";
    else
      err << "giant plan: " << explain_fits_nowhere(model, cluster, result) << "\n";
    return 1;
  }
  print_plan_table(result.best, out);
  out << "run #1: " << train_command_line(model, cluster, result.best.front()).text() << "\n";
  if (result.best.size() >= 2) out << "why: " << explain_choice(result.best[0], result.best[1]) << "\n";
  if (result.best_other_split)
    out << "against the best other split: " << explain_choice(result.best[0], *result.best_other_split) << "\n";
  out << "searched " << result.valid_layouts << " layouts, " << result.fitting_layouts << " fit in memory, "
      << result.simulated_layouts << " simulated step by step, in " << std::fixed << std::setprecision(2)
      << result.search_seconds << " s\n"
      << std::defaultfloat;
  if (a.show_schedule) print_plan_schedule(model, cluster, result.best.front(), out);
  return 0;
}

}  // namespace

void add_plan_flags(CLI::App& app, PlanArgs& a) {
  app.description("giant plan: choose the parallel layout, predict step time and memory, explain");
  app.add_option("--model", a.model, "model preset (see --list-presets) or TOML file ([model] + train.global_batch)");
  app.add_option("--cluster", a.cluster, "cluster preset or TOML file (e.g. from --calibrate)");
  app.add_option("--hosts", a.hosts, "override the cluster's host count")->check(at_least_one());
  app.add_option("--top", a.top, "plans to show (default 5)")->check(at_least_one());
  app.add_flag("--json", a.json, "print the plans as JSON");
  app.add_option("--precision", a.precision,
                 "fp32, bf16 or fp16: the dtype the run computes in, its rates from the cluster file "
                 "(default: the dtype of the cluster's [device] rates)");
  app.add_option("--grad-dtype", a.grad_dtype,
                 "fp32, bf16 or fp16: the dtype gradients accumulate and are reduced in (default: as --precision; "
                 "giant train's is fp32)");
  app.add_option("--layout", a.layout, "evaluate one layout, e.g. tp=4,pp=4,dp=2,mb=1,schedule=1f1b; unset parts are searched");
  app.add_option("--eval-csv", a.eval_csv, "evaluate the published layouts of a published-runs.csv file (rows that cannot be get a note)");
  app.add_flag("--report-error", a.report_error, "with --eval-csv: median errors in-sample and leaving each source out, over the rows evaluated");
  app.add_flag("--show-schedule", a.show_schedule,
               "print the chosen plan's pipeline schedule as a time x rank grid (one line per rank)");
  app.add_flag("--compare-baselines", a.compare_baselines, "the chosen plan beside Megatron tp=4 pp=4 and ZeRO-3 (giant's and DeepSpeed's), on TCP and RDMA");
  app.add_flag("--calibrate", a.calibrate, "measure this machine and write a cluster file (under giant launch: the cluster of the ranks started)");
  app.add_option("--out", a.out_file, "with --calibrate: the cluster file to write (default: standard output)");
  app.add_option("--devices", a.devices, "with --calibrate: devices (ranks) per host (default: cores)")->check(at_least_one());
  app.add_option("--max-micro-batch", a.max_micro_batch, "largest micro-batch searched (default 64)")->check(at_least_one());
  app.add_flag("--simulate-all", a.simulate_all, "simulate every fitting layout step by step (slow; default: the best 256)");
  app.add_flag("--print-specs", a.print_specs, "print the model and cluster as TOML and stop");
  app.add_flag("--list-presets", a.list_presets, "list the model and cluster presets");
  app.footer("Exit status: 0 a plan, 1 nothing fits (or no --eval-csv row could be evaluated), 2 bad input.");
}

int run_plan_command(const PlanArgs& a, std::ostream& out, std::ostream& err, const CalibrationProbes& probes) {
  if (a.list_presets) return list_presets(out), 0;
  if (a.report_error && a.eval_csv.empty()) throw ConfigError("--report-error", "needs --eval-csv FILE");
  if (!a.eval_csv.empty()) return run_eval_csv(a, out, err);
  if (a.calibrate) return run_calibrate(a, out, probes);
  return run_plan(a, out, err);
}

}  // namespace giant::planner
