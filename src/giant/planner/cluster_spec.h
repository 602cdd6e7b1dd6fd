// A cluster as the planner sees it: hosts of identical devices, one link kind
// inside a host and one across hosts. Bandwidths are line rates from the
// hardware specification; `efficiency` turns them into what ccl achieves.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "giant/base/precision.h"

namespace giant::planner {

enum class Transport { nvlink, pcie, shm, tcp, rdma };
const char* transport_name(Transport transport);
Transport parse_transport(const std::string& name);  // throws ConfigError

// Share of a TCP link's line rate left as goodput: MSS over frame, 1448/1514
// (the reference measured 956 Mbit/s on a 1 Gbit/s veth, the same ratio).
constexpr double kTcpGoodputRatio = 1448.0 / 1514.0;
// Share of the goodput a ring collective reaches as busbw: the reference's
// loopback figures, 1.56 GB/s allreduce busbw (n=2) against 1.6 GB/s per
// direction with both directions busy. `giant plan --calibrate` measures it.
constexpr double kCollectiveGoodputRatio = 1.56 / 1.6;

struct LinkSpec {
  Transport transport = Transport::nvlink;
  // Inside a host: per device and direction. Across hosts: per host and
  // direction (all its NICs together).
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
  double efficiency = 0;  // achieved busbw / line rate; 0 = default for the transport

  double effective_bandwidth() const;  // line rate x efficiency
};
double default_link_efficiency(Transport transport);

// What a device reaches computing in one dtype (a [device.bf16] table of a
// cluster file). 0 = the [device] figure.
struct PrecisionRates {
  double peak_flops = 0;
  double gemm_efficiency = 0;
  double gemm_half_dim = 0;
  double gemm_overhead_s = 0;
  double elementwise_bytes_per_s = 0;
};

struct DeviceSpec {
  std::string type;           // "A100", "V100", "T4", "cpu"; picks the default constants
  double peak_flops = 0;      // dense peak in the [device] dtype (dtype_bytes): 16-bit for GPUs
  double memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  double reserved_bytes = 0;  // context, allocator slack; 0 = default (see usable_memory)
  // Global efficiency constants of the device type (efficiency_constants.h):
  // a large GEMM reaches gemm_efficiency x peak; a dimension of gemm_half_dim
  // costs as much again as an infinite one. 0 = the type's default.
  double gemm_efficiency = 0;
  double gemm_half_dim = 0;
  // Fixed time of each GEMM call on top of its FLOPs (dispatch, packing,
  // tile set-up): what makes oneDNN's bf16 products on a CPU slow at small
  // sizes while large ones run near peak. 0 = none (the GPU presets).
  double gemm_overhead_s = 0;
  // Rate at which the training library's elementwise kernels (norms,
  // softmax, GeLU, residual adds, layout copies) move bytes, counting each
  // tensor read or written once. 0 = memory_bandwidth_bytes_per_s: a GPU's
  // kernels stream from HBM at its bandwidth; a CPU core's are slower than
  // its streaming bandwidth (exp, erf, reductions), so `--calibrate` measures
  // them. Calibrated files give this and the rates above for one device
  // while every device of the host works (what training does).
  double elementwise_bytes_per_s = 0;
  // Element size of the dtype the rates above are for: 0 = 2 (16-bit, as
  // the published runs and the GPU presets); 4 for fp32, as `--calibrate`
  // measures them. A plan computes in this dtype unless asked for another.
  double dtype_bytes = 0;
  // Rates in other dtypes (or this one, overriding): a run computing in one
  // of them uses its table, each figure left at 0 falling back to the one above.
  std::map<Precision, PrecisionRates> precision_rates;

  double usable_memory() const;
  double elementwise_bandwidth() const {
    return elementwise_bytes_per_s > 0 ? elementwise_bytes_per_s : memory_bandwidth_bytes_per_s;
  }
  double element_bytes() const { return dtype_bytes > 0 ? dtype_bytes : 2; }
  // The dtype of the [device] rates: fp32 for 4-byte elements, else bf16.
  Precision default_precision() const;
  // Whether the rates of `precision` are known: its own table, or the
  // [device] rates are of a dtype its size (bf16 and fp16 run alike on GPUs).
  bool has_rates_for(Precision precision) const;
  // This device computing in `precision`: its table's rates over the
  // [device] ones, elements of its size, no tables. Without a table (and
  // has_rates_for false) the [device] rates with the precision's element size.
  DeviceSpec in_precision(Precision precision) const;
};

struct ClusterSpec {
  std::string name;
  int hosts = 1;
  int devices_per_host = 1;
  DeviceSpec device;
  LinkSpec intra_host;
  LinkSpec inter_host;

  int devices() const { return hosts * devices_per_host; }
  // Throws ConfigError naming the first bad field.
  void validate() const;
  // A copy with 0 (default) constants replaced by their defaults.
  ClusterSpec resolved() const;
};

// 8 x A100-80GB NVSwitch + 8 x 200 Gb/s InfiniBand ("a100-80g-ib"),
// 8 x V100-32GB at 100 Gb/s ("v100-tcp", "v100-rdma"),
// 8 x A100-40GB at 800 Gb/s ("a100-40g-tcp", "a100-40g-rdma"); 4 hosts each.
// Their [device] peak is the 16-bit tensor-core rate; an fp32 table has the
// data sheet's fp32 rate.
std::vector<std::string> cluster_preset_names();
ClusterSpec cluster_preset(const std::string& name);  // throws ConfigError

}  // namespace giant::planner
