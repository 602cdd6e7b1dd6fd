#include "giant/planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "giant/base/error.h"
#include "giant/planner/comm_model.h"
#include "giant/planner/compute_model.h"

namespace giant::planner {

namespace {

// Megatron's gradient buckets hold at least 40M parameters; the last one
// cannot overlap any backward.
constexpr double kBucketParameters = 40e6;

// What the pipeline runs on, per stage and micro-batch, and what the
// busiest rank (the last: it carries the logits) spends of it on compute,
// on tensor-parallel collectives and on ZeRO-3 gathers left exposed.
struct StageTimes {
  ActionCosts costs;
  double compute_per_micro = 0, tp_per_micro = 0, zero3_exposed_per_micro = 0;
};

StageTimes stage_times(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const RunPrecision& precision) {
  const DeviceSpec device = c.device.in_precision(precision.compute);
  const double element_bytes = precision.compute_bytes();    // activations and the weights' compute copy
  const double gradient_bytes = precision.gradient_bytes();  // what data parallelism reduces
  const int p = l.pp, v = l.virtual_stages;
  const double layers_per_chunk = double(m.layers) / (p * v);
  const GroupLink tp_link = group_link(c, l, Axis::tp);
  const GroupLink dp_link = group_link(c, l, Axis::dp);

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

  // ZeRO-3 gathers a chunk's weights before its forward and its backward
  // and reduce-scatters its gradients, prefetched so that they overlap the
  // compute of the same micro-batch.
  // One collective per layer, so the ring's latency counts per layer.
  const double layer_weight_bytes = layer_parameters(m) / l.tp * element_bytes;
  const double layer_gradient_bytes = layer_parameters(m) / l.tp * gradient_bytes;
  const double zero3_forward = l.zero == 3 ? layers_per_chunk * allgather_seconds(layer_weight_bytes, dp_link) : 0;
  const double zero3_backward =
      l.zero == 3 ? layers_per_chunk * (allgather_seconds(layer_weight_bytes, dp_link) +
                                        reduce_scatter_seconds(layer_gradient_bytes, dp_link))
                  : 0;

  StageTimes t;
  for (int stage = 0; stage < p * v; ++stage) {
    double compute_f = layers_per_chunk * layer.forward_s, compute_b = layers_per_chunk * layer.backward_s;
    double tp_f = layers_per_chunk * tp_forward, tp_b = layers_per_chunk * tp_backward;
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
    const double f = std::max(compute_f + tp_f, zero3_forward), b = std::max(compute_b + tp_b, zero3_backward);
    t.costs.forward_s.push_back(f);
    t.costs.backward_s.push_back(b);
    if (stage % p == p - 1) {  // the last rank carries the logits: the busiest
      t.compute_per_micro += compute_f + compute_b;
      t.tp_per_micro += tp_f + tp_b;
      t.zero3_exposed_per_micro += std::max(0.0, f + b - (compute_f + tp_f + compute_b + tp_b));
    }
  }
  const double transfer_bytes = activation_bytes / (l.tp > 1 ? l.tp : 1);  // scattered over the tp ranks
  t.costs.transfer_s = point_to_point_seconds(transfer_bytes, group_link(c, l, Axis::pp));
  return t;
}

}  // namespace

ActionCosts pipeline_action_costs(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                  const CostOptions& options) {
  return stage_times(m, c, l, resolve_precision(options.precision, c.device)).costs;
}

Estimate estimate_layout(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const CostOptions& options) {
  const RunPrecision precision = resolve_precision(options.precision, c.device);
  const DeviceSpec device = c.device.in_precision(precision.compute);
  const double element_bytes = precision.compute_bytes();
  const double gradient_bytes = precision.gradient_bytes();
  Estimate e;
  e.layout = l;
  e.precision = precision;
  e.memory = memory_per_device(m, l, precision);
  e.usable_memory_bytes = device.usable_memory();
  e.fits = e.memory.total() <= e.usable_memory_bytes;

  const int p = l.pp, v = l.virtual_stages;
  const int64_t micro_batches = l.micro_batches(m);
  const GroupLink pp_link = group_link(c, l, Axis::pp);
  const GroupLink dp_link = group_link(c, l, Axis::dp);
  const StageTimes stages = stage_times(m, c, l, precision);
  const ActionCosts& costs = stages.costs;

  double makespan = 0, makespan_without_transfers = 0, busiest = 0;
  if (options.simulate_pipeline && p > 1) {
    // Sends and receives take no rank time, so the compute lists give the
    // lowered schedule's times (test_schedule checks it) at a third of the
    // work and memory: the search simulates hundreds of layouts.
    const PipelineSchedule schedule = generate_schedule({l.schedule, p, v, micro_batches});
    SimulationOptions step_only;
    step_only.timeline = false;
    makespan = simulate_schedule(schedule, costs, step_only).step_s;
    ActionCosts free_transfers = costs;
    free_transfers.transfer_s = 0;
    const SimulationResult ideal = simulate_schedule(schedule, free_transfers, step_only);
    makespan_without_transfers = ideal.step_s;
    busiest = *std::max_element(ideal.busy_s.begin(), ideal.busy_s.end());
    e.simulated = true;
  } else {
    double f = 0, b = 0;
    for (int stage = p - 1; stage < p * v; stage += p) {
      f += costs.forward_s[stage];
      b += costs.backward_s[stage];
    }
    makespan_without_transfers = pipeline_closed_form_s(p, v, micro_batches, l.schedule, f, b);
    // Each of the p - 1 boundaries costs its transfer once each way on the fill and drain.
    makespan = makespan_without_transfers + (p > 1 ? 2.0 * (p - 1) * v * costs.transfer_s : 0);
    busiest = micro_batches * (f + b);
  }
  const double per_micro = stages.compute_per_micro + stages.tp_per_micro + stages.zero3_exposed_per_micro;
  e.time.compute_s = micro_batches * stages.compute_per_micro;
  e.time.tp_comm_s = micro_batches * stages.tp_per_micro;
  e.time.bubble_s = std::max(0.0, makespan_without_transfers - busiest);
  e.time.pp_comm_s = std::max(0.0, makespan - makespan_without_transfers);
  // Busiest device may be a device other than the last when times tie; keep the sum exact.
  const double unexplained = busiest - micro_batches * per_micro;
  e.time.compute_s += std::max(0.0, unexplained);
  // ZeRO-3's exposed gathers are inside the makespan already; the rest follows it.
  double after_pipeline = 0;

  // Gradient sync of the device's parameters over dp, overlapped with the
  // last backward pass of the device. ZeRO-1/2 reduce-scatter the gradients
  // and allgather the updated compute copy: a ring moves what an allreduce
  // of elements of their mean size moves (the same bytes when both dtypes are one).
  const double sync_element_bytes = l.zero == 0 ? gradient_bytes : (gradient_bytes + element_bytes) / 2;
  if (l.dp > 1 && l.zero < 3) {
    const double sync = allreduce_seconds(e.memory.parameters * sync_element_bytes, dp_link);
    const double buckets = std::max(1.0, std::floor(e.memory.parameters / kBucketParameters));
    double last_backward = 0;
    for (int chunk = 0; chunk < v; ++chunk) last_backward += costs.backward_s[chunk * p];
    after_pipeline += std::max(sync - last_backward, sync / buckets);
  }
  // Tied embedding: the first and last stage allreduce its gradient.
  if (p > 1) {
    GroupLink tie = pp_link;
    tie.size = 2;
    after_pipeline += allreduce_seconds(double(m.vocab) * m.hidden / l.tp * gradient_bytes, tie);
  }
  e.time.dp_comm_s = micro_batches * stages.zero3_exposed_per_micro + after_pipeline;
  e.time.optimizer_s = optimizer_seconds(device, e.memory.parameters / (l.zero >= 1 ? l.dp : 1), precision);
  e.time.step_s = makespan + after_pipeline + e.time.optimizer_s;

  e.samples_per_s = m.global_batch / e.time.step_s;
  e.model_tflops_per_device = model_flops_per_iteration(m, false) / e.time.step_s / l.devices() / 1e12;
  e.mfu = e.model_tflops_per_device * 1e12 / device.peak_flops;
  return e;
}

}  // namespace giant::planner
