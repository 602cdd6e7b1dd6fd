// Memory per device: model states under each ZeRO stage (Rajbhandari et al.
// 2020) and activations under each recomputation choice and schedule
// (Korthikanti et al. 2022); see docs/reference/published-figures.md.
#pragma once

#include "giant/layout/layout.h"
#include "giant/planner/model_spec.h"
#include "giant/planner/run_precision.h"

namespace giant::planner {

// Bytes per parameter of AdamW on one of d data-parallel ranks: the compute
// copy w, the gradient g, and the optimizer's fp32 state S (the master copy
// 4 under mixed precision, two moments 8): w + g + S; ZeRO-1 w + g + S/d;
// ZeRO-2 w + (g + S)/d; ZeRO-3 (w + g + S)/d (the gathered working set is
// counted apart: zero3_gathered_bytes).
// How mixed precision changes the bytes: the compute copy shrinks from 4 to
// 2 bytes, but a 4-byte fp32 master copy joins the optimizer state, and the
// gradient stays in its own dtype (train.grad_dtype; fp32 in giant train by
// default even with bf16 compute). So fp32 training: 16, 8 + 8/d, 4 + 12/d,
// 16/d; bf16 with fp32 gradients (giant's default under bf16): 18, 6 + 12/d,
// 2 + 16/d, 18/d; 16-bit with 16-bit gradients (the published runs): 16,
// 4 + 12/d, 2 + 14/d, 16/d.
double model_state_bytes_per_parameter(int zero, int dp, const RunPrecision& precision);

// How the engine runs ZeRO (the trainer's parallel.* keys), for what it
// holds beside the model states and when its collectives run. Its defaults
// are the trainer's: giant train's keys take them from here.
struct ZeroEngine {
  // parallel.bucket_mb. Small buckets start the link early in the backward
  // and leave little behind it: on a 2-host link of 11 Mbit/s, 1 MiB
  // waited 0.3-0.4 s a step on the int8 wire where 4 MiB waited 0.7-1.1 s.
  // ZeRO-2: each bucket's full-size gradient is staged until its
  // reduce-scatter is done; two in flight (one filling, one reducing).
  double bucket_bytes = 1.0 * 1024 * 1024;
  int zero3_prefetch = 1;                   // parallel.zero3_prefetch: layers gathered ahead
  // parallel.zero3_regather: gather each layer for every micro-batch's
  // forward and backward (true), or a stage's whole weights once per step,
  // kept across its micro-batches, with its gradients accumulated in full
  // and reduce-scattered after the last one (false; only matters with pp).
  bool zero3_regather = true;
  // Megatron's scatter-gather of pipeline sends: each of a stage's tp ranks
  // sends 1/tp of the activation and the next stage allgathers it (the
  // published Megatron and DeepSpeed runs). Giant's pipeline sends the whole
  // activation from every tp rank (false).
  bool pipeline_sends_split_over_tp = false;
  // DeepSpeed's ZeRO-3 as it is known to behave (docs/reference/formats.md,
  // "ZeRO-3 as the anchors run it"; its defaults): one
  // collective per parameter tensor, not per layer; prefetch by elements
  // (stage3_prefetch_bucket_size 5e7), so a layer larger than that cannot be
  // gathered ahead while the previous layer computes: its first weight (qkv,
  // a quarter of a block's) waits, the rest is fetched tensor by tensor
  // behind the compute; at most 1e9 elements gathered at once
  // (stage3_max_live_parameters); gradients reduced in 5e8-element buckets
  // (reduce_bucket_size); no pipeline with ZeRO-2/3. Used by `giant plan
  // --compare-baselines` and the published DeepSpeed rows.
  bool deepspeed = false;
  double deepspeed_prefetch_elements = 5e7;
  double deepspeed_max_live_elements = 1e9;
  double deepspeed_reduce_bucket_elements = 5e8;
};

// Transformer blocks on pipeline stage `stage` of pp (virtual_stages 1):
// layers / pp when it divides; else, when layers + 2 divides, the embedding
// and the head each count as one block (Megatron-DeepSpeed's
// type:transformer|embedding partition, as the published 176B run used):
// the first and last stage hold one block fewer; with more stages than
// blocks, as the trainer's default partition (parameters) cuts its layer
// list (embedding, blocks, final norm, head), so some stages hold none;
// else the first layers % pp stages one block more (the trainer's uniform
// partition; its default, by parameters, has the same largest stage on
// GPT's blocks).
int64_t stage_blocks(const ModelSpec& model, int pp, int stage);
// The layers of the list the trainer cuts into pipeline stages: the
// embedding, the blocks, the final norm and the head.
int64_t layer_list_length(const ModelSpec& model);
// Whether the model can be cut into pp stages of v chunks each, as the
// trainer cuts it: one chunk each (v = 1), any pp up to layer_list_length,
// the stages as stage_blocks says; interleaved chunks (v > 1) even, so pp x v
// divides the layers.
bool stages_can_cut(const ModelSpec& model, int pp, int virtual_stages);

// ZeRO-3's gathered (compute-copy) weights a device holds at once, tp-split:
// the running layer and zero3_prefetch layers ahead, or the stage's whole
// weights without regathering under a pipeline; 0 for other stages.
double zero3_gathered_bytes(const ModelSpec& model, const Layout& layout, const RunPrecision& precision,
                            const ZeroEngine& engine, int64_t stage_blocks);

// Activation bytes one layer keeps for one micro-batch of b sequences, in
// elements of 2 bytes (the published formula; 4-byte elements double it):
// s b h (34 + 5 a s / h) at t=1; s b h (10 + 24/t + 5 a s/(h t)) with tensor
// parallel; s b h (34/t + 5 a s/(h t)) with sequence parallel; selective
// recomputation drops the 5 a s / h term; full keeps the 2 s b h input
// (2 s b h / t with sequence parallel).
double layer_activation_bytes(const ModelSpec& model, double micro_batch, int tp, bool sequence_parallel,
                              Recompute recompute, double element_bytes);

// Micro-batches whose activations stage `stage` holds at once: GPipe m;
// 1F1B min(p - stage, m); interleaved p (1 + (p-1)/(p v)) in units of a
// stage's layers (the first stage's, taken for every stage); 1 without a
// pipeline.
double in_flight_micro_batches(const Layout& layout, int64_t micro_batches, int stage = 0);

struct MemoryBreakdown {
  double parameters = 0;   // parameters held by the device (unsharded count)
  double model_states = 0; // bytes of weights, gradients and optimizer state
  double activations = 0;  // bytes of kept activations incl. the working layer
  double logits = 0;       // bytes of the logit layer's output (last stage)
  // ZeRO-2's staged buckets, ZeRO-3's gathered weights and its one layer of
  // full-size gradient before the reduce-scatter (or a stage's gradients
  // without regathering).
  double comm_buffers = 0;
  double total() const { return model_states + activations + logits + comm_buffers; }
};

// The device that needs the most over the pipeline's stages: the first
// (most micro-batches in flight, embedding), the last (logits, tied
// embedding copy), or with uneven stages the second (most blocks and
// micro-batches at once).
MemoryBreakdown memory_per_device(const ModelSpec& model, const Layout& layout, const RunPrecision& precision,
                                  const ZeroEngine& engine = {});

}  // namespace giant::planner
