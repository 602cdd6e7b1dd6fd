// `giant plan --calibrate`: measure this machine and describe it as a
// cluster file. GEMM rates come from a caller's probe (libtorch lives above
// the planner) or, without one, from a plain blocked C++ matmul; ccl's
// allreduce bandwidth and latency are measured between ranks as threads
// over TCP loopback, once as one host and once as two (distinct host ids).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "giant/planner/cluster_spec.h"

namespace giant::planner {

struct CalibrationProbes {
  // FLOP/s of an m x n x k GEMM (2 m n k FLOPs) in the training dtype on the
  // training device. Empty: the built-in float32 blocked matmul.
  std::function<double(int64_t m, int64_t n, int64_t k)> gemm_flops_per_s;
  std::string device_type = "cpu";
};

struct CalibrationOptions {
  int devices = 0;  // devices (ranks) per host to describe; 0 = this machine's cores
  int ranks = 2;    // ranks in the ccl measurements
  int repeats = 5;  // medians of this many timed runs
  std::vector<int64_t> gemm_sizes = {64, 128, 256, 384, 512};
  int64_t bandwidth_bytes = 16 << 20;
  int64_t latency_bytes = 4 << 10;
};

struct GemmSample {
  int64_t m, n, k;
  double flops_per_s;
};

// Rate and half dimension that best explain the samples under
// rate = peak / (1 + d/m + d/n + d/k) (least squares of log rate).
struct GemmFit {
  double peak_flops = 0;
  double half_dim = 0;
};
GemmFit fit_gemm_curve(const std::vector<GemmSample>& samples);

// float32 C = A B with cache blocking; FLOP/s, median of `repeats`.
double measure_blocked_matmul_flops(int64_t m, int64_t n, int64_t k, int repeats);

// Writes what it measures to `log` (one key=value line each) and returns a
// one-host cluster whose links carry the measured busbw (efficiency 1).
ClusterSpec calibrate_this_machine(const CalibrationProbes& probes, const CalibrationOptions& options,
                                   std::ostream& log);

}  // namespace giant::planner
