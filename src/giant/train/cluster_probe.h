// parallel.auto without parallel.cluster: the cluster the run was started
// on, measured on the run's own ranks before the layout is planned.
//
// Compute: every rank times the calibration GEMM shapes, the elementwise
// kernels and a streaming copy in the run's precision at the same time, each
// kept up for many scheduler time slices, so each rate is a device's while
// all devices work (as in training, ranks sharing cores included), and the
// slowest rank's rates are kept. Links: ccl allreduces timed among the ranks
// of each host and among one rank of each host (ccl's host topology), a
// latency-bound size and a bandwidth-bound one sized from a pilot so the
// probes fit the time budget. Every rank returns the same cluster. On a GPU
// all of it runs on the device: its kernels, its memory, and allreduces of
// device buffers through ccl's device backend (NCCL).
#pragma once

#include <string>

#include <c10/core/Device.h>

#include "giant/base/precision.h"
#include "giant/planner/cluster_spec.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::train {

struct ClusterProbeOptions {
  // The run's device (resolved train.device): on a GPU the rates are the
  // GPU's, its memory the device's, and the links NCCL's on device buffers.
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  Precision precision = Precision::fp32;  // the run's compute precision
  int threads = 1;                        // torch threads per rank, as the run uses
  double budget_s = 20;                   // what the probes may take in all
};

struct MeasuredCluster {
  planner::ClusterSpec cluster;
  double seconds = 0;   // what measuring took (the slowest rank's)
  std::string summary;  // one line: the rates and links found
};

// Collective over world (null or size 1: this process alone). Throws
// giant::ConfigError (key parallel.cluster) when hosts run different
// numbers of ranks: the planner's clusters are of identical hosts.
MeasuredCluster measure_cluster(ccl::Communicator* world, const ClusterProbeOptions& options);

}  // namespace giant::train
