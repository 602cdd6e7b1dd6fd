#include "giant/planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "giant/base/error.h"
#include "giant/planner/comm_model.h"
#include "giant/planner/low_rank_wire_model.h"
#include "giant/planner/compute_model.h"

namespace giant::planner {

namespace {

// Collectives DeepSpeed's ZeRO-3 issues per layer and pass: one per
// parameter tensor (a GPT block has 12: four weights, four biases, two norms'
// weight and bias), where Giant gathers a layer's flat shard in one.
constexpr double kDeepSpeedCollectivesPerLayer = 12;
// The qkv weight's share of a block's parameters (3 h^2 of 12 h^2): what a
// layer larger than DeepSpeed's prefetch window waits for before it runs.
constexpr double kDeepSpeedFirstWeightShare = 0.25;

// What the pipeline runs on, per stage and micro-batch, and what the
// busiest rank (the last: it carries the logits) spends of it on compute,
// on tensor-parallel collectives and on ZeRO-3 gathers left exposed.
struct StageTimes {
  ActionCosts costs;
  double compute_per_micro = 0, tp_per_micro = 0, zero3_exposed_per_micro = 0;
};

// ZeRO-3's collectives of one layer over the dp group: the gather of its
// compute copy and the reduce-scatter of its gradient.
struct Zero3Layer {
  double gather_s = 0, reduce_scatter_s = 0;
  double prefetched_share = 1;  // of a layer's gather that can start before the layer runs
  // The embedding's unit, on the stages holding it: gathered before the
  // first layer (nothing to hide behind) and reduce-scattered after the
  // last backward (nothing after it).
  double embedding_gather_s = 0, embedding_reduce_scatter_s = 0;
};

Zero3Layer zero3_layer(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const RunPrecision& precision,
                       const ZeroEngine& engine) {
  const GroupLink dp_group = group_link(c, l, Axis::dp);
  const GroupLink dp_link = single_ring_link(c, dp_group);
  Zero3Layer z;
  if (l.zero != 3 || l.dp == 1) return z;
  const double layer_elements = layer_parameters(m) / l.tp;
  const bool ccl_runs_it = !engine.deepspeed;
  z.gather_s = zero_movement_seconds(layer_elements * precision.compute_bytes(), c, dp_group, ccl_runs_it);
  z.reduce_scatter_s = zero_movement_seconds(layer_elements * precision.gradient_bytes(), c, dp_group, ccl_runs_it);
  const double embedding_elements = embedding_parameters(m) / l.tp;  // vocabulary-parallel
  z.embedding_gather_s =
      zero_movement_seconds(embedding_elements * precision.compute_bytes(), c, dp_group, ccl_runs_it);
  z.embedding_reduce_scatter_s =
      zero_movement_seconds(embedding_elements * precision.gradient_bytes(), c, dp_group, ccl_runs_it);
  if (engine.deepspeed) {
    // Per-tensor collectives: the ring's latency once per tensor.
    const double extra_latency = (kDeepSpeedCollectivesPerLayer - 1) * (dp_link.size - 1) * dp_link.latency_s;
    z.gather_s += extra_latency;
    z.reduce_scatter_s += extra_latency;
    z.prefetched_share = layer_elements <= engine.deepspeed_prefetch_elements ? 1 : 1 - kDeepSpeedFirstWeightShare;
  } else if (engine.zero3_prefetch == 0) {
    z.prefetched_share = 0;
  }
  return z;
}

// One pass (forward or backward) over `blocks` layers under ZeRO-3: each
// layer waits for the part of its gather that could not start ahead; the
// prefetched part (and in backward the reduce-scatters, which run behind)
// overlaps the layers' compute. The first layer's gather has nothing to
// hide behind, the last reduce-scatter neither.
double zero3_pass_seconds(double compute_s, int64_t blocks, const Zero3Layer& z, bool backward) {
  if (z.gather_s <= 0 || blocks == 0) return compute_s;
  const double exposed_gathers = blocks * (1 - z.prefetched_share) * z.gather_s;
  const double overlapped = (blocks - 1) * z.prefetched_share * z.gather_s +
                            (backward ? (blocks - 1) * z.reduce_scatter_s : 0);
  return z.prefetched_share * z.gather_s + exposed_gathers + std::max(compute_s, overlapped) +
         (backward ? z.reduce_scatter_s : 0);
}

StageTimes stage_times(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const RunPrecision& precision,
                       const ZeroEngine& engine) {
  const DeviceSpec device = c.device.in_precision(precision.compute);
  const double element_bytes = precision.compute_bytes();    // activations and the weights' compute copy
  const int p = l.pp, v = l.virtual_stages;
  const GroupLink tp_link = group_link(c, l, Axis::tp);

  // Per layer and micro-batch: compute and the tensor-parallel allreduces
  // (2 forward, 2 backward, 2 more to recompute the forward).
  const LayerTimes layer = layer_compute_times(m, device, l);
  const double activation_bytes = double(l.micro_batch) * m.seq_len * m.hidden * element_bytes;
  const double tp_collective = allreduce_seconds(activation_bytes, tp_link);
  const double tp_forward = 2 * tp_collective;
  const double tp_backward = (l.recompute == Recompute::full ? 4 : 2) * tp_collective;
  const LayerTimes logits = logit_compute_times(m, device, l);
  const LayerTimes embedding = embedding_compute_times(m, device, l);
  // Vocabulary-parallel cross entropy: three allreduces of b s floats; the
  // logit layer's input gradient is allreduced in backward, and the
  // vocabulary-parallel embedding's output in forward.
  const double loss_collectives = 3 * allreduce_seconds(double(l.micro_batch) * m.seq_len * 4, tp_link);

  // ZeRO-3 gathers each layer before its forward and its backward and
  // reduce-scatters its gradient, for every micro-batch (without
  // regathering under a pipeline: once per step, counted by estimate_layout).
  const bool per_micro_zero3 = l.zero == 3 && (p == 1 || engine.zero3_regather);
  const Zero3Layer zero3 = per_micro_zero3 ? zero3_layer(m, c, l, precision, engine) : Zero3Layer{};

  StageTimes t;
  for (int stage = 0; stage < p * v; ++stage) {
    const int64_t blocks = v == 1 ? stage_blocks(m, p, stage) : m.layers / (p * v);
    double compute_f = blocks * layer.forward_s, compute_b = blocks * layer.backward_s;
    double tp_f = blocks * tp_forward, tp_b = blocks * tp_backward;
    if (stage == 0) {
      compute_f += embedding.forward_s;
      compute_b += embedding.backward_s;
      tp_f += tp_collective;
    }
    if (stage == p * v - 1) {
      compute_f += logits.forward_s;
      compute_b += logits.backward_s;
      tp_f += loss_collectives;
      tp_b += tp_collective;
    }
    double f = zero3_pass_seconds(compute_f + tp_f, blocks, zero3, false);
    double b = zero3_pass_seconds(compute_b + tp_b, blocks, zero3, true);
    if (stage == 0 || stage == p * v - 1) {  // the embedding, tied to the logit layer
      f += zero3.embedding_gather_s;
      b += zero3.embedding_reduce_scatter_s;
    }
    t.costs.forward_s.push_back(f);
    t.costs.backward_s.push_back(b);
    if (stage % p == p - 1) {  // the last rank carries the logits: the busiest
      t.compute_per_micro += compute_f + compute_b;
      t.tp_per_micro += tp_f + tp_b;
      t.zero3_exposed_per_micro += std::max(0.0, f + b - (compute_f + tp_f + compute_b + tp_b));
    }
  }
  const bool scattered = engine.pipeline_sends_split_over_tp && l.tp > 1;
  const double transfer_bytes = activation_bytes / (scattered ? l.tp : 1);
  t.costs.transfer_s = point_to_point_seconds(transfer_bytes, group_link(c, l, Axis::pp));
  return t;
}

}  // namespace

ActionCosts pipeline_action_costs(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                  const CostOptions& options) {
  return stage_times(m, c, l, resolve_precision(options.precision, c.device), options.engine).costs;
}

namespace {

// The pipeline's step without the data-parallel tail: its makespan, the
// makespan were transfers free, and the busiest rank's compute.
struct PipelineTimes {
  double makespan = 0, without_transfers = 0, busiest = 0;
  bool simulated = false;
};

PipelineTimes pipeline_times(const Layout& l, int64_t micro_batches, const ActionCosts& costs, bool simulate) {
  const int p = l.pp, v = l.virtual_stages;
  PipelineTimes t;
  if (simulate && p > 1) {
    // Sends and receives take no rank time, so the compute lists give the
    // lowered schedule's times (test_schedule checks it) at a third of the
    // work and memory: the search simulates hundreds of layouts.
    const PipelineSchedule schedule = generate_schedule(pipeline_shape(l, micro_batches));
    SimulationOptions step_only;
    step_only.timeline = false;
    t.makespan = simulate_schedule(schedule, costs, step_only).step_s;
    ActionCosts free_transfers = costs;
    free_transfers.transfer_s = 0;
    const SimulationResult ideal = simulate_schedule(schedule, free_transfers, step_only);
    t.without_transfers = ideal.step_s;
    t.busiest = *std::max_element(ideal.busy_s.begin(), ideal.busy_s.end());
    t.simulated = true;
    return t;
  }
  double f = 0, b = 0;
  for (int stage = p - 1; stage < p * v; stage += p) {
    f += costs.forward_s[stage];
    b += costs.backward_s[stage];
  }
  t.without_transfers = pipeline_closed_form_s(p, v, micro_batches, l.schedule, f, b);
  // Each of the p - 1 boundaries costs its transfer once each way on the fill and drain.
  t.makespan = t.without_transfers + (p > 1 ? 2.0 * (p - 1) * v * costs.transfer_s : 0);
  t.busiest = micro_batches * (f + b);
  return t;
}

// What a transfer of `transfer_s` seconds leaves exposed after a backward
// pass of `backward_s` that produces it in `buckets` equal parts, each sent
// once the backward has produced it, one after another: the first part
// cannot start before 1/buckets of the backward, the last cannot hide at all.
double exposed_after_backward(double transfer_s, double backward_s, double buckets) {
  buckets = std::max(1.0, buckets);
  return std::max(transfer_s - backward_s + backward_s / buckets, transfer_s / buckets);
}

// How many gradient buckets the data-parallel engine reduces: the trainer's
// of parallel.bucket_mb, or DeepSpeed's of reduce_bucket_size elements.
double gradient_buckets(double parameters, double gradient_bytes, const ZeroEngine& engine) {
  if (engine.deepspeed) return std::ceil(parameters / engine.deepspeed_reduce_bucket_elements);
  return std::ceil(parameters * gradient_bytes / engine.bucket_bytes);
}

// The data-parallel gradient allreduce: ccl's choice (across hosts of
// several ranks with shared memory, reduced inside each host first), or
// DeepSpeed's flat one.
double dp_allreduce_seconds(double bytes, const ClusterSpec& c, const GroupLink& dp_link, const ZeroEngine& engine) {
  return engine.deepspeed ? allreduce_seconds(bytes, dp_link) : ccl_allreduce_seconds(bytes, c, dp_link);
}

// What follows the pipeline's makespan on the step's critical path: the
// data-parallel gradient sync and the tied embedding's allreduce (ZeRO-3's
// exposed gathers are inside the makespan already).
double after_pipeline_seconds(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const Estimate& e,
                              const ActionCosts& costs, const CostOptions& options) {
  const int p = l.pp, v = l.virtual_stages;
  const double element_bytes = e.precision.compute_bytes();
  const double gradient_bytes = e.precision.gradient_bytes();
  const GroupLink dp_link = group_link(c, l, Axis::dp);
  // A device's last backward pass (one per chunk it holds): what the
  // gradient collectives after the pipeline can hide behind.
  double last_backward = 0;
  for (int chunk = 0; chunk < v; ++chunk) last_backward += costs.backward_s[chunk * p];
  double after_pipeline = 0;

  // Gradient sync of the device's parameters over dp, overlapped with the
  // last backward pass of the device. ZeRO-1/2 reduce-scatter the gradients
  // and allgather the updated compute copy: a ring moves what an allreduce
  // of elements of their mean size moves (the same bytes when both dtypes are one).
  const double sync_element_bytes = l.zero == 0 ? gradient_bytes : (gradient_bytes + element_bytes) / 2;
  if (l.dp > 1 && l.zero < 3) {
    // A compressed wire allreduces the whole gradient (then ZeRO-1/2 gather
    // the updated compute copy uncompressed).
    const bool compressed = l.grad_wire != ccl::GradWire::none && dp_link.crosses_hosts;
    const double gather_updated = compressed && l.zero >= 1 ? zero_movement_seconds(e.memory.parameters * element_bytes,
                                                                                    c, dp_link, !options.engine.deepspeed)
                                                            : 0.0;
    if (compressed && ccl::low_rank_of(l.grad_wire) > 0) {
      // Averaged once backward is done: nothing hides.
      after_pipeline += low_rank_wire_seconds(m, c, l, dp_link) + gather_updated;
    } else {
      const double sync =
          compressed ? compressed_allreduce_seconds(e.memory.parameters * gradient_bytes, c, dp_link, l.grad_wire) +
                           gather_updated
                     : dp_allreduce_seconds(e.memory.parameters * sync_element_bytes, c, dp_link, options.engine);
      const double buckets = gradient_buckets(e.memory.parameters, gradient_bytes, options.engine);
      after_pipeline += exposed_after_backward(sync, last_backward, buckets);
    }
  }
  // ZeRO-3 under a pipeline without regathering: each stage gathers its
  // weights once before its first forward (nothing to hide behind) and
  // reduce-scatters its accumulated gradients after its last backward
  // (overlapped with that backward as the buckets above).
  if (l.dp > 1 && l.zero == 3 && p > 1 && !options.engine.zero3_regather) {
    const bool ccl_runs_it = !options.engine.deepspeed;
    const double gather = zero_movement_seconds(e.memory.parameters * element_bytes, c, dp_link, ccl_runs_it);
    const double reduce = zero_movement_seconds(e.memory.parameters * gradient_bytes, c, dp_link, ccl_runs_it);
    const double blocks = double(stage_blocks(m, p, p - 1));
    after_pipeline += gather + exposed_after_backward(reduce, last_backward, blocks);
  }
  // Tied embedding: the first and last stage allreduce its gradient.
  if (p > 1) {
    GroupLink tie = group_link(c, l, Axis::pp);
    tie.size = 2;
    after_pipeline += allreduce_seconds(double(m.vocab) * m.hidden / l.tp * gradient_bytes, tie);
  }
  return after_pipeline;
}

}  // namespace

Estimate estimate_layout(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const CostOptions& options) {
  const RunPrecision precision = resolve_precision(options.precision, c.device);
  const DeviceSpec device = c.device.in_precision(precision.compute);
  Estimate e;
  e.layout = l;
  e.precision = precision;
  e.memory = memory_per_device(m, l, precision, options.engine);
  e.memory.comm_buffers += grad_wire_memory_bytes(e.memory.parameters, c, l);
  e.usable_memory_bytes = device.usable_memory();
  e.fits = e.memory.total() <= e.usable_memory_bytes;

  const int64_t micro_batches = l.micro_batches(m.global_batch);
  const StageTimes stages = stage_times(m, c, l, precision, options.engine);
  const PipelineTimes pipeline = pipeline_times(l, micro_batches, stages.costs, options.simulate_pipeline);
  e.simulated = pipeline.simulated;
  const double per_micro = stages.compute_per_micro + stages.tp_per_micro + stages.zero3_exposed_per_micro;
  e.time.compute_s = micro_batches * stages.compute_per_micro;
  e.time.tp_comm_s = micro_batches * stages.tp_per_micro;
  e.time.bubble_s = std::max(0.0, pipeline.without_transfers - pipeline.busiest);
  e.time.pp_comm_s = std::max(0.0, pipeline.makespan - pipeline.without_transfers);
  // Busiest device may be a device other than the last when times tie; keep the sum exact.
  const double unexplained = pipeline.busiest - micro_batches * per_micro;
  e.time.compute_s += std::max(0.0, unexplained);

  const double after_pipeline = after_pipeline_seconds(m, c, l, e, stages.costs, options);
  e.time.dp_comm_s = micro_batches * stages.zero3_exposed_per_micro + after_pipeline;
  e.time.optimizer_s = optimizer_seconds(device, e.memory.parameters / (l.zero >= 1 ? l.dp : 1), precision);
  e.time.step_s = pipeline.makespan + after_pipeline + e.time.optimizer_s;

  e.samples_per_s = m.global_batch / e.time.step_s;
  e.model_tflops_per_device = model_flops_per_iteration(m, false) / e.time.step_s / l.devices() / 1e12;
  e.mfu = e.model_tflops_per_device * 1e12 / device.peak_flops;
  return e;
}

}  // namespace giant::planner
