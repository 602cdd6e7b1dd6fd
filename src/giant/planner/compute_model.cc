#include "giant/planner/compute_model.h"

#include "giant/base/error.h"
#include "giant/planner/memory_model.h"

namespace giant::planner {

double gemm_flops_per_s(const DeviceSpec& d, double m, double n, double k) {
  GIANT_CHECK(d.gemm_efficiency > 0 && d.gemm_half_dim >= 0, "device constants not resolved");
  const double x = d.gemm_half_dim;
  return d.gemm_efficiency * d.peak_flops / (1 + x / m + x / n + x / k);
}

double gemm_seconds(const DeviceSpec& d, double m, double n, double k, double batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  return batch * 2 * m * n * k / gemm_flops_per_s(d, m, n, k) + d.gemm_overhead_s;
}

namespace {

// Each activation a layer keeps is written once and read once by its
// elementwise kernels (norms, softmax, dropout, GeLU, residuals); backward
// moves twice that.
double elementwise_seconds(const ModelSpec& m, const DeviceSpec& d, const Layout& l, Recompute kept) {
  return 2 * layer_activation_bytes(m, l.micro_batch, l.tp, l.sequence_parallel, kept, d.element_bytes()) /
         d.elementwise_bandwidth();
}

}  // namespace

LayerTimes layer_compute_times(const ModelSpec& m, const DeviceSpec& d, const Layout& l) {
  const double b = l.micro_batch, s = m.seq_len, h = m.hidden, f = m.ffn_size(), t = l.tp;
  const double a = m.heads, head_dim = h / a, tokens = b * s;
  const double dense = gemm_seconds(d, tokens, 3 * h / t, h)  // qkv
                       + gemm_seconds(d, tokens, h, h / t)    // projection
                       + gemm_seconds(d, tokens, f / t, h)    // fc1
                       + gemm_seconds(d, tokens, h, f / t);   // fc2
  const double attention = gemm_seconds(d, s, s, head_dim, b * a / t)    // scores
                           + gemm_seconds(d, s, head_dim, s, b * a / t); // weighted values
  const double ew_all = elementwise_seconds(m, d, l, Recompute::none);
  const double ew_without_attention = elementwise_seconds(m, d, l, Recompute::selective);

  LayerTimes times;
  times.forward_gemm_s = dense + attention;
  times.forward_s = dense + attention + ew_all;
  times.backward_s = 2 * (dense + attention) + 2 * ew_all;
  if (l.recompute == Recompute::full) times.backward_s += times.forward_s;
  // Selective recomputation redoes the attention core: its GEMMs and softmax/dropout.
  if (l.recompute == Recompute::selective) times.backward_s += attention + (ew_all - ew_without_attention);
  return times;
}

LayerTimes logit_compute_times(const ModelSpec& m, const DeviceSpec& d, const Layout& l) {
  const double tokens = double(l.micro_batch) * m.seq_len, v = double(m.vocab) / l.tp;
  const double gemm = gemm_seconds(d, tokens, v, m.hidden);
  // Softmax cross entropy reads and writes the logits (training dtype) and an fp32 copy.
  const double loss = tokens * v * (d.element_bytes() + 4) * 2 / d.elementwise_bandwidth();
  // The final layer norm reads and writes the b s h hidden states; backward twice.
  const double norm = 2 * tokens * m.hidden * d.element_bytes() / d.elementwise_bandwidth();
  LayerTimes times;
  times.forward_gemm_s = gemm;
  times.forward_s = gemm + loss / 2 + norm;
  times.backward_s = 2 * gemm + loss / 2 + 2 * norm;
  return times;
}

LayerTimes embedding_compute_times(const ModelSpec& m, const DeviceSpec& d, const Layout& l) {
  const double tokens = double(l.micro_batch) * m.seq_len;
  const double forward = 4 * tokens * m.hidden * d.element_bytes() / d.elementwise_bandwidth();
  LayerTimes times;
  times.forward_s = forward;
  times.backward_s = 2 * forward;
  return times;
}

double optimizer_seconds(const DeviceSpec& d, double parameters_updated, const RunPrecision& precision) {
  const double bytes = 24 + precision.gradient_bytes() + (precision.keeps_master_weights() ? precision.compute_bytes() : 0);
  return parameters_updated * bytes / d.memory_bandwidth_bytes_per_s;
}

}  // namespace giant::planner
