// Memory per device: model states under each ZeRO stage (Rajbhandari et al.
// 2020) and activations under each recomputation choice and schedule
// (Korthikanti et al. 2022); see ../shared/reference/README.md.
#pragma once

#include "giant/planner/layout.h"
#include "giant/planner/model_spec.h"
#include "giant/planner/run_precision.h"

namespace giant::planner {

// Bytes per parameter of Adam on one of d data-parallel ranks: the compute
// copy w, the gradient g, and the optimizer's fp32 state S (the master copy
// 4 under mixed precision, two moments 8): w + g + S; ZeRO-1 w + g + S/d;
// ZeRO-2 w + (g + S)/d; ZeRO-3 (w + g + S)/d. 16-bit with 16-bit gradients
// (the published runs): 16, 4 + 12/d, 2 + 14/d, 16/d; bf16 with fp32
// gradients 18, ...; fp32 (no master copy) 16, 8 + 8/d, ...
double model_state_bytes_per_parameter(int zero, int dp, const RunPrecision& precision);

// Activation bytes one layer keeps for one micro-batch of b sequences, in
// elements of 2 bytes (the published formula; 4-byte elements double it):
// s b h (34 + 5 a s / h) at t=1; s b h (10 + 24/t + 5 a s/(h t)) with tensor
// parallel; s b h (34/t + 5 a s/(h t)) with sequence parallel; selective
// recomputation drops the 5 a s / h term; full keeps the 2 s b h input
// (2 s b h / t with sequence parallel).
double layer_activation_bytes(const ModelSpec& model, double micro_batch, int tp, bool sequence_parallel,
                              Recompute recompute, double element_bytes);

// Micro-batches whose activations the first stage holds at once: GPipe m;
// 1F1B min(p, m); interleaved p (1 + (p-1)/(p v)) in units of a stage's
// layers; 1 without a pipeline.
double in_flight_micro_batches(const Layout& layout, int64_t micro_batches);

struct MemoryBreakdown {
  double parameters = 0;   // parameters held by the device (unsharded count)
  double model_states = 0; // bytes of weights, gradients and optimizer state
  double activations = 0;  // bytes of kept activations incl. the working layer
  double logits = 0;       // bytes of the logit layer's output (last stage)
  double total() const { return model_states + activations + logits; }
};

// The device that needs the most: the first stage (most micro-batches in
// flight, embedding) or the last (logits, tied embedding copy).
MemoryBreakdown memory_per_device(const ModelSpec& model, const Layout& layout, const RunPrecision& precision);

}  // namespace giant::planner
