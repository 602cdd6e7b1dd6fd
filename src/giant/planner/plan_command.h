// `giant plan`: its flags and the command as a library function, so
// apps/giant only parses (with the giant command's shared CLI handling) and
// forwards. Tables and CSV go to `out`, notes and "nothing fits" to `err`.
#pragma once

#include <ostream>
#include <string>

#include "giant/planner/calibrate.h"

namespace CLI {
class App;
}

namespace giant::planner {

// What the flags of `giant plan` hold (giant plan --help describes each).
struct PlanArgs {
  std::string model;
  std::string cluster;
  int hosts = 0;
  int top = 5;
  bool json = false;
  std::string layout;
  std::string precision;   // "" = the cluster file's [device] dtype
  std::string grad_dtype;  // "" = as precision
  std::string eval_csv;
  bool report_error = false;
  bool compare_baselines = false;
  bool show_schedule = false;
  bool calibrate = false;
  std::string out_file;
  int devices = 0;
  int max_micro_batch = 64;
  bool simulate_all = false;
  bool print_specs = false;
  bool list_presets = false;
};

// Adds every flag of `giant plan` to app, bound to args.
void add_plan_flags(CLI::App& app, PlanArgs& args);

// Writes `cluster` as a cluster file, headed by `comment`, to out_file (a
// "wrote" line on out), or to out when out_file is empty; ConfigError
// ("--out") when the file cannot be written. Returns 0.
int write_cluster_file(const ClusterSpec& cluster, const std::string& comment, const std::string& out_file,
                       std::ostream& out);

// Runs the command. Returns 0 for a plan (or the table, file or list asked
// for), 1 when nothing fits or no row of --eval-csv could be evaluated;
// throws ConfigError for bad input (a flag, a spec, a file).
// probes: the measurements --calibrate makes (apps/giant passes ones built
// on libtorch).
int run_plan_command(const PlanArgs& args, std::ostream& out, std::ostream& err,
                     const CalibrationProbes& probes = CalibrationProbes{});

}  // namespace giant::planner
