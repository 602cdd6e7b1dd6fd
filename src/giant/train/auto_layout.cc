#include "giant/train/auto_layout.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "giant/base/error.h"
#include "giant/base/synced_files.h"
#include "giant/ccl/communicator.h"
#include "giant/planner/cluster_spec.h"
#include "giant/planner/plan_report.h"
#include "giant/planner/run_precision.h"
#include "giant/planner/search.h"
#include "giant/planner/spec_toml.h"
#include "giant/train/cluster_probe.h"
#include "giant/train/memory_check.h"
#include "giant/train/run_device.h"

namespace giant::train {

void read_cluster_file(RunConfig& config, int world_size) {
  const std::string& file = config.parallel.cluster;
  if (file.empty()) {
    throw ConfigError("parallel.cluster", "choosing from a file needs parallel.cluster: write one with "
                                          "`giant plan --calibrate --devices N --out cluster.toml`, or leave it "
                                          "empty under giant train to have the cluster measured");
  }
  planner::ClusterSpec cluster;
  try {
    cluster = planner::load_cluster_toml(file);
  } catch (const Error& e) {
    throw ConfigError("parallel.cluster", e.what());
  }
  if (cluster.devices() != world_size) {
    throw ConfigError("parallel.cluster", "'" + file + "' describes " + std::to_string(cluster.devices()) +
                                              " devices but " + std::to_string(world_size) +
                                              " rank(s) were started");
  }
  config.parallel.known_cluster = cluster;
}

namespace {

// A cluster file of other devices than the run's (GPUs for a run on the
// CPU, or the reverse): the choice is for the file's devices, said plainly.
std::string device_note(const RunConfig& config, const planner::ClusterSpec& cluster) {
  const DeviceSetting run = parse_device(config.train.device);
  if (run.kind == DeviceSetting::Kind::automatic) return "";  // not settled: nothing to compare
  const bool file_on_cpu = cluster.device.type == "cpu", run_on_cpu = run.kind == DeviceSetting::Kind::cpu;
  if (file_on_cpu == run_on_cpu) return "";
  return "note: '" + config.parallel.cluster + "' describes " + cluster.device.type +
         " devices but this run is on " + config.train.device +
         ": the layout is chosen for the file's devices (leave parallel.cluster empty to measure these)\n";
}

}  // namespace

std::string choose_layout(RunConfig& config, int world_size) {
  read_cluster_file(config, world_size);
  return choose_layout_on(config, *config.parallel.known_cluster, config.parallel.cluster) +
         device_note(config, *config.parallel.known_cluster);
}

std::string choose_layout_on(RunConfig& config, const planner::ClusterSpec& cluster, const std::string& source) {
  config.parallel.known_cluster = cluster;
  const planner::ModelSpec model = planner_model(config);
  planner::SearchOptions options;
  options.engine = planner_engine(config);
  if (config.parallel.zero_set) options.filter.zero = config.layout.zero;
  if (config.parallel.recompute_set) options.filter.recompute = config.layout.recompute;
  if (config.parallel.grad_wire_auto) options.grad_wires = planner::kChosenGradWires;
  else options.filter.grad_wire = config.layout.grad_wire;
  // options.train_runs_only (the default) keeps to layouts this trainer runs.
  // train.precision is concrete here (auto is resolved before the layout is chosen).
  options.precision = planner_precision(config);
  options.top = 3;
  std::vector<planner::Estimate> ranked;
  try {
    ranked = planner::best_layouts(model, cluster, options);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw ConfigError("parallel.auto", e.what());
  }
  const planner::Estimate& best = ranked.front();
  // The planner knows nothing of the trainer's own limits (heads, MLP and
  // vocabulary splitting over tp are checked again by check_layout).
  config.layout = best.layout;  // the stage, recomputation and wire as set or chosen
  config.parallel.grad_wire_auto = false;
  config.parallel.automatic = false;
  char line[512];
  std::snprintf(line, sizeof line,
                "parallel.auto: dp=%d pp=%d tp=%d micro_batch=%d (%s) on %s in %s (predicted %.3f s per step, "
                "%.1f samples/s)",
                best.layout.dp, best.layout.pp, best.layout.tp, best.layout.micro_batch,
                best.layout.describe().c_str(), source.c_str(),
                best.precision.describe().c_str(), best.time.step_s, best.samples_per_s);
  const std::string note = planner::missing_rates_note(cluster.device, best.precision.compute);
  // The best candidates as `giant plan` shows them: the step and where its time goes.
  std::ostringstream candidates;
  planner::print_plan_table(ranked, candidates);
  const std::string order = planner::ranking_note(ranked);
  if (!order.empty()) candidates << "a faster layout is ranked lower: " << order << "\n";
  return (note.empty() ? std::string(line) : std::string(line) + "; " + note) + "\n" + candidates.str();
}

std::string measure_and_choose_layout(RunConfig& config, ccl::Communicator* world) {
  ClusterProbeOptions probe;
  probe.device = run_device(config.train);
  probe.precision = planner_precision(config).compute;
  probe.threads = static_cast<int>(config.train.threads);
  const MeasuredCluster measured = measure_cluster(world, probe);
  const std::string file = (std::filesystem::path(config.train.out_dir) / "cluster.toml").string();
  if (world == nullptr || world->rank() == 0) {
    std::filesystem::create_directories(config.train.out_dir);
    write_synced(file, planner::cluster_to_toml(measured.cluster));
  }
  return "parallel.auto: " + measured.summary + "; written to " + file + " (giant plan --cluster reads it)\n" +
         choose_layout_on(config, measured.cluster, "the measured cluster");
}

}  // namespace giant::train
