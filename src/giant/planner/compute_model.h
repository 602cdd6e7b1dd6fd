// Compute time of one device: GEMMs at a rate that grows with matrix size,
// elementwise work at the device's elementwise rate (memory bandwidth unless
// calibrated), the optimizer at memory bandwidth.
#pragma once

#include "giant/planner/cluster_spec.h"
#include "giant/layout/layout.h"
#include "giant/planner/model_spec.h"
#include "giant/planner/run_precision.h"

namespace giant::planner {

// Rate of an m x n x k GEMM: gemm_efficiency x peak / (1 + d/m + d/n + d/k)
// with d = gemm_half_dim: a dimension of d halves the rate of a large GEMM.
// The device must be resolved (ClusterSpec::resolved).
double gemm_flops_per_s(const DeviceSpec& device, double m, double n, double k);
// Time of `batch` independent m x n x k GEMMs (2 m n k FLOPs each) in one
// call (a batch is one batched product): their FLOPs at the rate above plus
// the device's gemm_overhead_s once.
double gemm_seconds(const DeviceSpec& device, double m, double n, double k, double batch = 1);

// One transformer layer on one device for one micro-batch of b sequences,
// split tp ways. Backward includes recomputation. `device` computes in the
// run's precision (DeviceSpec::in_precision): its rates and element size.
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

// Adam over the device's shard, at memory bandwidth (streaming: the state
// outgrows caches): it reads and writes the fp32 weight (the master copy
// under mixed precision) and two fp32 moments, 24 bytes, reads the gradient
// in its dtype, and under mixed precision writes the new compute copy. fp16
// with fp16 gradients: 24 + 2 + 2 = 28 bytes a parameter; bf16 with fp32
// gradients 30; fp32 24 + 4 = 28.
double optimizer_seconds(const DeviceSpec& device, double parameters_updated, const RunPrecision& precision);

}  // namespace giant::planner
