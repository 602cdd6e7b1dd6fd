// Step-by-step simulation of a pipeline schedule: each device runs its
// forward and backward passes in the schedule's order, each as soon as its
// inputs have arrived; sends are asynchronous, so communication overlaps
// compute and only delays the receiver.
#pragma once

#include <cstdint>
#include <vector>

#include "giant/planner/layout.h"

namespace giant::planner {

struct PipelineInput {
  int stages = 1;               // p devices in the pipeline
  int chunks_per_stage = 1;     // v (interleaved); model chunk c runs on device c % p
  int64_t micro_batches = 1;    // m
  Schedule schedule = Schedule::one_f_one_b;
  std::vector<double> forward_s;   // per model chunk (p x v entries), one micro-batch
  std::vector<double> backward_s;  // likewise, recomputation included
  double transfer_s = 0;           // an activation or its gradient to the next device
};

struct PipelineResult {
  double makespan_s = 0;
  double busiest_device_s = 0;  // compute time of the busiest device
};

// Megatron's orders: GPipe all forwards then all backwards; 1F1B p-d-1
// warm-up forwards on device d; interleaved (p-d-1) x 2 + (v-1) x p warm-up
// forwards over chunks in groups of p micro-batches.
PipelineResult simulate_pipeline(const PipelineInput& input);

// The closed form for equal stages: (m + p - 1)(f + b) for GPipe and 1F1B,
// m (f + b) + (p - 1)(f + b) / v interleaved, where f and b are a device's
// time per micro-batch; transfers ignored. For quick pruning and tests.
double pipeline_closed_form_s(int stages, int chunks_per_stage, int64_t micro_batches, Schedule schedule,
                              double device_forward_s, double device_backward_s);

}  // namespace giant::planner
