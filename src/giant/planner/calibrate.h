// `giant plan --calibrate`: measure this machine and describe it as a
// cluster file. GEMM and elementwise rates come from a caller's probes
// (libtorch lives above the planner) or, without them, from a plain blocked
// C++ matmul and a streaming C++ loop; ccl's allreduce bandwidth and latency
// are measured between ranks as threads over TCP loopback, once as one host
// and once as two (distinct host ids).
//
// A device is one rank. The devices of a host share its memory bandwidth
// and caches, so the GEMM, elementwise and memory rates are measured on one
// thread while every other device of the host (devices_per_host - 1 more
// threads) runs the same kernel: the per-device rates when all devices
// work, as in training. With --devices 1 nothing else runs.
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
  // training device. Empty: the built-in float32 blocked matmul. Called from
  // several threads at once.
  std::function<double(int64_t m, int64_t n, int64_t k)> gemm_flops_per_s;
  // Bytes read + written per second by the training library's elementwise
  // kernels (layer norm, softmax, GeLU, residual add, layout copy) on
  // rows x cols tensors. Empty: the built-in streaming loop
  // (stream_triad_bytes_per_s). Called from several threads at once.
  std::function<double(int64_t rows, int64_t cols)> elementwise_bytes_per_s;
  std::string device_type = "cpu";
  int dtype_bytes = 4;  // the dtype the probes measure in (float32)
};

struct CalibrationOptions {
  int devices = 0;  // devices (ranks) per host to describe; 0 = this machine's cores
  int ranks = 2;    // ranks in the ccl measurements
  int repeats = 5;  // medians of this many timed runs
  std::vector<int64_t> gemm_sizes = {64, 128, 256, 384, 512};
  // Elementwise tensors: 4 MiB of float32, rows as long as a small model's
  // hidden size (a layer's activations: past the private caches of a core).
  int64_t elementwise_rows = 4096, elementwise_cols = 256;
  int64_t memory_bytes = 64 << 20;  // per buffer of the streaming copy
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

// float32 a = b + s c over `elements`: 12 bytes an element; bytes/s,
// median of `repeats`.
double stream_triad_bytes_per_s(int64_t elements, int repeats);

// Runs `measure` on this thread while `busy - 1` other threads run
// `load(worker)` (worker 0 .. busy - 2) over and over, each started before
// `measure` begins and stopped after it ends: the rate of one device while
// `busy` devices work. Rethrows the first error of any of them.
double measure_while_busy(int busy, const std::function<void(int worker)>& load,
                          const std::function<double()>& measure);

// Writes what it measures to `log` (one key=value line each, rates alone
// and with all devices busy) and returns a one-host cluster with the busy
// rates and whose links carry the measured busbw (efficiency 1).
ClusterSpec calibrate_this_machine(const CalibrationProbes& probes, const CalibrationOptions& options,
                                   std::ostream& log);

}  // namespace giant::planner
