// The few global efficiency constants per device type: everything else in
// the cost model comes from hardware specifications and formulas. They are
// fitted once over all of tests/planner/data/published-runs.csv (see
// eval_runs.h, `giant plan --eval-csv ... --report-error`), never to
// a single row; a device type without rows uses the all-type values.
#pragma once

#include <string>

namespace giant::planner {

struct EfficiencyConstants {
  double gemm_efficiency = 0;  // large-GEMM rate / peak
  double gemm_half_dim = 0;    // rate = eff x peak / (1 + d/m + d/n + d/k)
};

EfficiencyConstants default_efficiency_constants(const std::string& device_type);

}  // namespace giant::planner
