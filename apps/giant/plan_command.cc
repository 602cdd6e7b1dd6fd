// giant plan: the planner's command, with a libtorch GEMM probe for --calibrate.
#include <iostream>

#include <torch/torch.h>

#include "commands.h"
#include "giant/planner/plan_command.h"
#include "giant/train/matmul_rate.h"

namespace giant::app {

int plan_command(const std::vector<std::string>& args) {
  planner::CalibrationProbes probes;
  probes.device_type = "cpu";
  // A device here is one rank on one core, as giant launch runs them with
  // train.threads = 1.
  probes.gemm_flops_per_s = [](int64_t m, int64_t n, int64_t k) {
    torch::set_num_threads(1);
    return train::measure_gemm_flops(m, n, k);
  };
  return planner::run_plan_command(args, std::cout, std::cerr, probes);
}

}  // namespace giant::app
