// `giant plan`: the command as a library function, so apps/giant (and the
// tests) only forward their arguments. Returns the exit code;
// tables and CSV go to `out`, errors to `err`.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "giant/planner/calibrate.h"

namespace giant::planner {

// args: what follows `giant plan`, e.g. {"--model", "gpt-13b", "--cluster", "v100-tcp", "--top", "5"}.
int run_plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// The same with a measured GEMM probe for --calibrate (apps/giant passes one
// built on libtorch).
int run_plan_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                     const CalibrationProbes& probes);

}  // namespace giant::planner
