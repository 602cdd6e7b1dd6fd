// giant plan: the planner's command, with libtorch GEMM, elementwise and
// precision probes for --calibrate: they time the kernels training runs, as
// it runs them, in each precision the device computes in. Under a launcher
// (more than one rank), --calibrate measures the cluster the ranks run on
// instead, as parallel.auto does, and rank 0 writes it.
#include <iostream>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/error.h"
#include "giant/base/tunables.h"
#include "giant/ccl/bootstrap.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/config.h"
#include "giant/planner/plan_command.h"
#include "giant/train/calibration_probes.h"
#include "giant/train/cluster_probe.h"

namespace giant::app {
namespace {

// The launched ranks measure their cluster together: fp32 rates with every
// rank working, one thread each, and ccl's links inside and between hosts.
int calibrate_launched_cluster(const planner::PlanArgs& args, const ccl::Environment& env) {
  if (args.devices != 0) {
    throw ConfigError("--devices", "under a launcher the ranks started are the devices: leave --devices out");
  }
  Tunables keys;
  ccl::CommConfig::define_tunables(keys);
  keys.apply_environment(env.vars());
  const ccl::Bootstrap bootstrap = ccl::bootstrap_from_environment(env, keys);
  const train::MeasuredCluster measured = train::measure_cluster(bootstrap.world.get(), {});
  if (bootstrap.world->rank() != 0) return kExitOk;
  std::cout << "giant plan: " << measured.summary << '\n';
  return planner::write_cluster_file(measured.cluster,
                                     "written by giant plan --calibrate under a launcher: the cluster its " +
                                         std::to_string(bootstrap.world->size()) + " ranks ran on, fp32",
                                     args.out_file, std::cout);
}

}  // namespace

int plan_command(const std::vector<std::string>& args) {
  CLI::App cli("", "giant plan");
  planner::PlanArgs plan_args;
  GlobalFlags global;
  planner::add_plan_flags(cli, plan_args);
  add_global_flags(cli, global);
  if (const auto code = parse_command_line(cli, args)) return *code;
  apply_global_flags(global);
  try {
    const ccl::Environment env = ccl::Environment::from_process();
    if (plan_args.calibrate && ccl::resolve_bootstrap(env).world_size > 1) {
      return calibrate_launched_cluster(plan_args, env);
    }
    return planner::run_plan_command(plan_args, std::cout, std::cerr, train::libtorch_calibration_probes());
  } catch (const c10::Error& e) {
    return report_failure("giant plan", Error(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return report_failure("giant plan", e);
  }
}

}  // namespace giant::app
