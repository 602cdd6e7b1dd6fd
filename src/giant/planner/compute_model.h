// Compute time of one device: GEMMs at a rate that grows with matrix size,
// elementwise work at the device's elementwise rate (memory bandwidth unless
// calibrated), the optimizer at memory bandwidth.
#pragma once

#include "giant/planner/cluster_spec.h"
#include "giant/planner/layout.h"
#include "giant/planner/model_spec.h"

namespace giant::planner {

// Rate of an m x n x k GEMM: gemm_efficiency x peak / (1 + d/m + d/n + d/k)
// with d = gemm_half_dim: a dimension of d halves the rate of a large GEMM.
// The device must be resolved (ClusterSpec::resolved).
double gemm_flops_per_s(const DeviceSpec& device, double m, double n, double k);
// Time of `batch` independent m x n x k GEMMs (2 m n k FLOPs each).
double gemm_seconds(const DeviceSpec& device, double m, double n, double k, double batch = 1);

// One transformer layer on one device for one micro-batch of b sequences,
// split tp ways. Backward includes recomputation.
struct LayerTimes {
  double forward_s = 0;
  double backward_s = 0;
  double forward_gemm_s = 0;  // forward GEMMs alone (recomputation repeats them)
};
LayerTimes layer_compute_times(const ModelSpec& model, const DeviceSpec& device, const Layout& layout);

// The final layer norm, the logit layer and its loss on the last stage:
// forward and backward.
LayerTimes logit_compute_times(const ModelSpec& model, const DeviceSpec& device, const Layout& layout);

// The embedding on the first stage, elementwise work only: the lookup writes
// the b s h embeddings and the position add reads them and the position rows
// and writes the sum (4 b s h elements); backward (the gradient's scatter
// into the table and the position rows) moves twice that.
LayerTimes embedding_compute_times(const ModelSpec& model, const DeviceSpec& device, const Layout& layout);

// Adam over the device's shard of fp32 master weights and moments: it reads
// the fp16 gradient and 12 bytes of state and writes 12 + 2, 28 bytes a
// parameter at memory bandwidth (streaming: the state outgrows caches). In
// float32 it reads weight, gradient and moments and writes three: 28 again.
double optimizer_seconds(const DeviceSpec& device, double parameters_updated);

}  // namespace giant::planner
