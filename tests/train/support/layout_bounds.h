// How far a layout's training may drift from another run of the same job in
// the same precision (the single process, or the same layout with another
// ZeRO stage): bounds derived from the roundings the two runs do not share,
// with support/rounding.h's arithmetic. Used by the layout, pipeline, ZeRO
// and resharding tests.
//
// The model. Per element of a result, count the roundings one run makes and
// the other does not (both runs' together) and take sqrt(n) u, independent
// sources in quadrature (support/rounding.h). A rounding is passed on to the
// loss and to every gradient with gain at most one (first order; LayerNorm
// and softmax normalise), and every gradient is charged every site of the
// step. Where the runs differ:
// - tp splits a product's reduction (length k): each rank accumulates k / tp
//   terms and rounds its part to the compute format, the ring adds the tp
//   parts. The kernel may accumulate in the compute format itself, in
//   another order in each run: libtorch 1.13 takes oneDNN (fp32
//   accumulation) for a bf16 product only where cpuinfo reports AVX-512
//   (BW, VL, DQ) and the product has more than 16^3 multiply-adds, and
//   otherwise its fallback gemm, whose untransposed case accumulates in
//   bf16 (a Zen 3 takes it for every product): 2 k + 2 tp roundings per
//   element, at each block's attention projection (k = hidden) and second
//   MLP layer (k = ffn) forward, and backward the input gradients of each
//   block's qkv (k = 3 hidden) and first MLP layer (k = ffn) and of the head
//   (k = padded vocabulary). The vocab-parallel cross entropy adds the
//   exponentials in fp32: 2 V + 2 tp fp32 roundings.
// - dp, pp and ZeRO: M micro-batch gradients summed in the gradient dtype
//   in another grouping or order (per rank, then over dp; each micro-batch
//   reduced apart; in a pipeline schedule's order): 2 (M + dp) roundings of
//   the gradient dtype.
// - pp: the tied embedding's two gradients (the embedding's and the head's)
//   are added in the compute format by the single process's autograd, on
//   the first and the last stage apart by a pipeline: 2 roundings of the
//   compute format. Stage boundaries pass activations exactly.
// - after the first step, masters that differ in any bit may round to other
//   compute copies (bf16 or fp16 from fp32): each product then takes a
//   weight off by one rounding, twice per product (forward and backward),
//   per run, over 4 linear layers a block and the head: 4 (4 L + 1)
//   roundings of the compute format.
// A step's loss is the mean over T tokens whose rounding errors are
// independent, so its error is the gradient bound / sqrt(T) (first order:
// an earlier update's difference reaches the loss through a gradient
// already counted), plus the loss's own fp32 sums over the tokens, the
// micro-batches and the ranks, which round differently once the terms
// differ: 2 (T + M + dp) roundings.
// Final parameters: AdamW moves an element by at most lr a step (Kingma
// and Ba 2015, section 2.1, as 1 - beta1 <= sqrt(1 - beta2)), and a relative
// gradient difference e changes m / sqrt(v) by at most 2 e of itself; over
// the steps a tensor of n elements then differs by at most
// 2 e steps lr sqrt(n), relative to its norm. Each update also rounds the
// fp32 master, differently once the masters differ: 2 steps fp32 roundings;
// and where the compute copies are compared, one rounding to them.
#pragma once

#include <cmath>

#include <torch/torch.h>

#include "giant/base/precision.h"
#include "giant/models/gpt_config.h"
#include "giant/train/run_config.h"
#include "support/rounding.h"

namespace giant::train::test {

using giant::test::RoundingBudget;
using giant::test::unit_roundoff;

struct LayoutBounds {
  double forward = 0;         // activations and logits of the first step's forward
  double first_gradient = 0;  // each gradient after the first step (relative norm)
  double gradient = 0;        // after later steps, whose compute copies may differ
  double loss = 0;            // each step's loss (relative)
  double steps_lr = 0;        // steps x lr: the most AdamW moves an element
  int64_t steps = 0;
  Precision compute = Precision::fp32;

  // The final value of a parameter (a compute copy where the run computes
  // in bf16 or fp16), given the reference's value.
  double parameter(const torch::Tensor& reference) const {
    const torch::Tensor value = reference.to(torch::kDouble);
    const double norm = value.norm().item<double>();
    const double moved = 2 * gradient * steps_lr * std::sqrt(static_cast<double>(value.numel()));
    const double stored = RoundingBudget().add(static_cast<double>(2 * steps), Precision::fp32).bound();
    return moved / norm + stored + (compute == Precision::fp32 ? 0 : 2 * unit_roundoff(compute));
  }
};

// What a run is compared with: the single process, or the same layout at
// another ZeRO stage (whose gradient reduction groups the micro-batches and
// ranks otherwise, and nothing more).
enum class Reference { single_process, other_zero_stage };

// The bounds for `c`'s layout (c.layout) against `reference`.
inline LayoutBounds layout_bounds(const RunConfig& c, Reference reference = Reference::single_process) {
  const models::GptConfig& m = c.model;
  const Precision compute = c.train.precision, grads = c.train.grad_dtype;
  const int64_t tp = c.layout.tp, dp = c.layout.dp, pp = c.layout.pp;
  const int64_t micro_batches = c.train.global_batch / c.layout.micro_batch;  // per step over all dp ranks
  const int64_t tokens = c.train.global_batch * m.seq_len;
  RoundingBudget forward, step, loss_sums;
  loss_sums.add(static_cast<double>(2 * (tokens + micro_batches + dp)), Precision::fp32);
  auto split = [&](int64_t k, int64_t sites, bool forward_site = false) {
    step.add(static_cast<double>(sites * (2 * k + 2 * tp)), compute);
    if (forward_site) forward.add(static_cast<double>(sites * (2 * k + 2 * tp)), compute);
  };
  const bool single = reference == Reference::single_process;
  if (single && tp > 1) {
    split(m.hidden, m.layers, true);      // attention projection, forward
    split(m.ffn_size(), m.layers, true);  // second MLP layer, forward
    split(3 * m.hidden, m.layers);      // qkv's input gradient
    split(m.ffn_size(), m.layers);      // first MLP layer's input gradient
    split(m.padded_vocab(), 1);         // the head's input gradient
    step.add(static_cast<double>(2 * m.padded_vocab() + 2 * tp), Precision::fp32);  // cross entropy
  }
  if (dp > 1 || pp > 1 || !single) step.add(static_cast<double>(2 * (micro_batches + dp)), grads);
  if (single && pp > 1) step.add(2, compute);
  LayoutBounds bounds;
  bounds.compute = compute;
  bounds.forward = forward.bound();
  bounds.first_gradient = step.bound();
  if (compute != Precision::fp32) step.add(static_cast<double>(4 * (4 * m.layers + 1)), compute);
  bounds.gradient = step.bound();
  bounds.loss = loss_sums.add_bound(bounds.gradient / std::sqrt(static_cast<double>(tokens))).bound();
  bounds.steps = c.train.steps;
  bounds.steps_lr = static_cast<double>(c.train.steps) * c.train.lr;
  return bounds;
}

}  // namespace giant::train::test
