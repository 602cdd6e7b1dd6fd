// `giant plan --calibrate`: measure this machine and describe it as a
// cluster file. GEMM and elementwise rates come from a caller's probes
// (libtorch lives above the planner) or, without them, from a plain blocked
// C++ matmul and a streaming C++ loop; ccl's allreduce bandwidth and latency
// are measured between ranks as threads over TCP loopback, once as one host
// and once as two (distinct host ids).
//
// A device is one rank. The devices of a host share its memory bandwidth
// and caches, and some cores are slower than others (a virtual machine's
// vCPUs, the core that takes interrupts). So the GEMM, elementwise and
// memory rates are measured once alone and once on every device at the same
// time, and the cluster file gets the slowest device's rates while all work:
// training's synchronous steps go at its pace. With --devices 1, the lone rates.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "giant/base/precision.h"
#include "giant/planner/cluster_spec.h"

namespace giant::planner {

struct CalibrationProbes {
  // FLOP/s of m x n x k GEMMs (2 m n k FLOPs each) in `precision` on the
  // training device, as training runs them (giant's: a linear layer's
  // forward and both backward products, with their transposed operands).
  // Empty: the built-in float32 blocked matmul. Called from several threads
  // at once.
  std::function<double(Precision precision, int64_t m, int64_t n, int64_t k)> gemm_flops_per_s;
  // Bytes read + written per second by the training library's elementwise
  // kernels (layer norm, softmax, GeLU, residual add, layout copy) on
  // rows x cols tensors of `precision`. Empty: the built-in float32
  // streaming loop (stream_triad_bytes_per_s). Called from several threads at once.
  std::function<double(Precision precision, int64_t rows, int64_t cols)> elementwise_bytes_per_s;
  // Why the device cannot compute in `precision` (its kernels are missing),
  // or "" when it can. Calibration measures each precision it can, fp32
  // first (fp32 must run). Empty: fp32 only (the built-in loops are float32).
  std::function<std::string(Precision precision)> why_unsupported;
  std::string device_type = "cpu";
};

struct CalibrationOptions {
  int devices = 0;  // devices (ranks) per host to describe; 0 = this machine's cores
  int ranks = 2;    // ranks in the ccl measurements
  int repeats = 5;  // medians of this many timed runs
  int probe_calls = 3;  // each rate: the median of this many probe calls (other users' noise)
  // GEMM shapes (m, n, k): squares from attention-sized up, and a layer's
  // shapes (m tokens, hidden-sized n and k). The large ones pin the fitted
  // peak, which small sizes alone leave to trade against the half dimension.
  std::vector<std::array<int64_t, 3>> gemm_shapes = {{64, 64, 64},      {128, 128, 128},  {256, 256, 256},
                                                     {384, 384, 384},   {512, 512, 512},  {768, 768, 768},
                                                     {1024, 256, 256},  {1024, 1024, 256}, {1024, 256, 1024}};
  // Elementwise tensors: 4 MiB of float32 (2 of bf16), rows as long as a small
  // model's hidden size (a layer's activations: past the private caches of a core).
  int64_t elementwise_rows = 4096, elementwise_cols = 256;
  int64_t memory_bytes = 64 << 20;  // per buffer of the streaming copy
  int64_t bandwidth_bytes = 16 << 20;
  int64_t latency_bytes = 4 << 10;
};

struct GemmSample {
  int64_t m, n, k;
  double flops_per_s;
};

// Peak, half dimension d and fixed time per GEMM c that best explain the
// samples (least squares of log rate) under
// time = 2 m n k (1 + d/m + d/n + d/k) / peak + c:
// d for sizes that waste a tile's or a vector's width, c for the set-up of
// each call (oneDNN's bf16 products on an AMX Xeon: about 20 us a call,
// their rate at 64^3 a thirtieth of that at 512^3, which no d explains).
struct GemmFit {
  double peak_flops = 0;
  double half_dim = 0;
  double overhead_s = 0;
};
GemmFit fit_gemm_curve(const std::vector<GemmSample>& samples);

// float32 C = A B with cache blocking; FLOP/s, median of `repeats`.
double measure_blocked_matmul_flops(int64_t m, int64_t n, int64_t k, int repeats);

// A streaming copy of `bytes` between two buffers: bytes read + written
// per second, median of `repeats`.
double measure_memory_bandwidth(int64_t bytes, int repeats);

// Median times of ccl allreduces of two sizes over `ranks` ranks.
struct AllreduceTimes {
  int ranks = 2;
  int64_t small_bytes = 0;  // a latency-bound size
  double small_s = 0;
  int64_t large_bytes = 0;  // a bandwidth-bound size
  double large_s = 0;
};

// The link those times show: the large allreduce's busbw, and the latency
// that makes the planner's allreduce model take the small one's time
// (efficiency 1: the bandwidth is what ccl achieves).
LinkSpec link_from_allreduce(const AllreduceTimes& times, Transport transport);

// float32 a = b + s c over `elements`: 12 bytes an element; bytes/s,
// median of `repeats`.
double stream_triad_bytes_per_s(int64_t elements, int repeats);

// Runs `measure` on `busy` threads at once (one per device), each going on
// with it until every thread has its first result: the rate of every device
// while all work. Rethrows the first error of any of them.
std::vector<double> measure_while_busy(int busy, const std::function<double()>& measure);

// Writes what it measures to `log` (one key=value line each, rates alone
// and with all devices busy, each GEMM and elementwise line naming its
// dtype; a line for each precision the device cannot run) and returns a
// one-host cluster with the busy (slowest device's) rates, fp32 in [device]
// (dtype_bytes 4) and each other precision measured in its table, and
// whose links carry the measured busbw (efficiency 1).
ClusterSpec calibrate_this_machine(const CalibrationProbes& probes, const CalibrationOptions& options,
                                   std::ostream& log);

}  // namespace giant::planner
