#include "giant/planner/low_rank_wire_model.h"

#include <algorithm>

#include "giant/ccl/grad_wire.h"
#include "giant/planner/memory_model.h"

namespace giant::planner {
namespace {

// Per f32 gradient element of an approximated matrix: the residual added
// in (12 bytes) and taken out (12), the two products reading it (8) and
// the approximation written (4), as elementwise traffic.
constexpr double kLowRankBytesPerElement = 36;

struct Count {
  double p = 0, q = 0, approximated = 0;
  void matrix(double rows, double cols, int rank) {
    if (2 * rank * (rows + cols) <= rows * cols) {
      p += rank * rows;
      q += rank * cols;
      approximated += rows * cols;
    } else {
      p += rows * cols;
    }
  }
};

Count count_stage(const ModelSpec& m, const Layout& l, int stage, int rank) {
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn_size()), t = l.tp;
  Count layer;
  layer.matrix(3 * h / t, h, rank);  // qkv
  layer.matrix(h, h / t, rank);      // projection
  layer.matrix(f / t, h, rank);      // fc1
  layer.matrix(h, f / t, rank);      // fc2
  layer.p += 3 * h / t + h + f / t + h + 4 * h;  // biases and norms
  const auto blocks = static_cast<double>(stage_blocks(m, l.pp, stage));
  Count all{layer.p * blocks, layer.q * blocks, layer.approximated * blocks};
  if (stage == 0 || stage == l.pp - 1) all.matrix(static_cast<double>(m.vocab) / t, h, rank);
  if (stage == 0) all.matrix(static_cast<double>(m.seq_len), h, rank);
  return all;
}

}  // namespace

LowRankWireElements low_rank_wire_elements(const ModelSpec& model, const Layout& layout, int stage, int rank) {
  const Count c = count_stage(model, layout, stage, rank);
  return {c.p, c.q};
}

double low_rank_wire_seconds(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout,
                             const GroupLink& dp_group) {
  const int rank = ccl::low_rank_of(layout.grad_wire);
  double slowest = 0;
  for (int stage = 0; stage < layout.pp; ++stage) {
    const Count c = count_stage(model, layout, stage, rank);
    const double seconds = ccl_allreduce_seconds(4 * c.p, cluster, dp_group) +
                           ccl_allreduce_seconds(4 * c.q, cluster, dp_group) +
                           c.approximated * kLowRankBytesPerElement / cluster.device.elementwise_bandwidth();
    slowest = std::max(slowest, seconds);
  }
  return slowest;
}

}  // namespace giant::planner
