// giant plan: the planner's command, with libtorch GEMM, elementwise and
// precision probes for --calibrate: they time the kernels training runs, as
// it runs them, in each precision the device computes in.
#include <iostream>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/error.h"
#include "giant/planner/plan_command.h"
#include "giant/train/calibration_probes.h"

namespace giant::app {

int plan_command(const std::vector<std::string>& args) {
  CLI::App cli("", "giant plan");
  planner::PlanArgs plan_args;
  GlobalFlags global;
  planner::add_plan_flags(cli, plan_args);
  add_global_flags(cli, global);
  if (const auto code = parse_command_line(cli, args)) return *code;
  apply_global_flags(global);
  try {
    return planner::run_plan_command(plan_args, std::cout, std::cerr, train::libtorch_calibration_probes());
  } catch (const c10::Error& e) {
    return report_failure("giant plan", Error(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return report_failure("giant plan", e);
  }
}

}  // namespace giant::app
