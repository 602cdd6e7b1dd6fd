#include "giant/planner/efficiency_constants.h"

namespace giant::planner {

EfficiencyConstants default_efficiency_constants(const std::string& type) {
  // Fitted over all rows of published-runs.csv (`giant plan --eval-csv
  // published-runs.csv --report-error` prints the fit): least median
  // absolute relative error of the step time; the half dimension is shared
  // by every type.
  constexpr double kHalfDim = 48;
  if (type == "A100") return {0.64, kHalfDim};
  if (type == "V100") return {0.72, kHalfDim};
  // T4 sits at the search's floor (0.30): the AMP rows run 2-3x slower than
  // any fp16 model predicts (their times match fp32 training, 8.1 TFLOP/s peak).
  if (type == "T4") return {0.30, kHalfDim};
  return {0.68, kHalfDim};  // any other type: the all-type fit
}

}  // namespace giant::planner
