// Runs one pipeline rank's part of a schedule (layout/schedule.h): its
// stages' forwards and backwards in the schedule's order, activations and
// their gradients sent point to point over a communicator of the pipeline
// group alone (rank = pp rank).
//
// A receive is posted where the lowered schedule places it (one compute
// ahead of its consumer) and waited on just before the consumer runs;
// sends never block, and a sent activation's storage is released once the
// send is done, unless autograd saved it. Every tensor between stages has
// the shape and dtype the caller states (from the config): a stage whose
// output differs is an error naming the stage.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "giant/layout/schedule.h"

namespace giant::ccl {
class Communicator;
}

namespace giant::parallel {

// One stage this rank holds: its layers' forward.
struct PipelineChunk {
  int stage = 0;
  std::function<at::Tensor(const at::Tensor&)> forward;
};

struct PipelineStepFunctions {
  // Stage 0: micro-batch m's input.
  std::function<at::Tensor(int64_t micro_batch)> input;
  // The last stage: the loss of micro-batch m's output (a scalar).
  std::function<at::Tensor(int64_t micro_batch, const at::Tensor& output)> loss;
  // Optional: called before each backward (a gradient reducer learns
  // whether it is the stage's last backward of the step: GPipe's is
  // micro-batch 0's).
  std::function<void(int stage, int64_t micro_batch)> before_backward;
};

struct PipelineStepResult {
  double loss_sum = 0;  // the last stage's rank: the micro-batches' losses summed
  double forward_s = 0, backward_s = 0;
  double wait_s = 0;  // blocked on receives and, at the end, on sends
  std::vector<int64_t> peak_in_flight;  // per chunk: the most activations kept at once
};

class PipelineExecutor {
 public:
  // `comm` is the pipeline group (its size the schedule's pp); chunks are
  // this rank's stages (stage % pp == comm.rank()).
  PipelineExecutor(ccl::Communicator& comm, std::vector<PipelineChunk> chunks);

  // Runs this rank's actions of a lowered schedule. Forward-only schedules
  // run without autograd. Before backward, each loss is multiplied by
  // `loss_factor` (the loss scale over the micro-batch count).
  PipelineStepResult run(const PipelineSchedule& lowered, const PipelineStepFunctions& functions,
                         at::IntArrayRef activation_shape, const at::TensorOptions& activation_options,
                         double loss_factor = 1.0);

  const std::vector<PipelineChunk>& chunks() const { return chunks_; }

 private:
  ccl::Communicator& comm_;
  std::vector<PipelineChunk> chunks_;
};

// The tag of a tensor between stages, by the stage that consumes it.
uint32_t pipeline_tag(bool gradient, int consumer_stage, int64_t micro_batch);

}  // namespace giant::parallel
