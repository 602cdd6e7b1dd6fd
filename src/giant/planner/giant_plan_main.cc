// giant-plan: stand-in for `giant plan` until apps/giant forwards to
// run_plan_command.
#include <iostream>
#include <string>
#include <vector>

#include "giant/planner/plan_command.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return giant::planner::run_plan_command(args, std::cout, std::cerr);
}
