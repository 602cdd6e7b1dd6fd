// Pipeline schedules as data: for each pipeline rank the ordered list of
// actions it runs in one training step. One definition, used by the planner's
// simulator (planner/schedule_simulate.h) and by the pipeline executor alike
// (torch-free).
//
// Stages are numbered as in Megatron: with v chunks per rank (interleaved),
// rank r holds stages r, p + r, ..., (v - 1) p + r; stage s runs on rank
// s % p. Stage 0 takes the data, stage p v - 1 computes the loss.
//
// A generator gives each rank its compute actions (forward, backward; the
// weight-gradient kind is reserved for zero-bubble schedules, where backward
// then means the input gradient only). lower_communication() inserts the
// point-to-point actions: a send right after the compute that produced the
// tensor, and each receive posted before the compute action that precedes
// the one needing it (so the transfer overlaps that compute), the first
// ones at the start. An executor posts a receive where it stands in the list
// and waits for it just before the compute that consumes it; sends never
// block. The simulator runs the lists with the same rules.
//
// Neighbouring stages are always on different ranks when pp > 1; with
// pp = 1 there is one stage and nothing to send.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "giant/layout/layout.h"

namespace giant {

enum class ActionKind : uint8_t {
  forward,          // the stage's layers on one micro-batch (the last stage: and the loss)
  backward,         // input and weight gradients (zero-bubble: input gradients only)
  weight_gradient,  // zero-bubble schedules only: the weight gradients of a backward
  send_activation,  // the forward's output to stage + 1
  recv_activation,  // the input of a forward, from stage - 1
  send_gradient,    // the backward's input gradient to stage - 1
  recv_gradient,    // the output gradient of a backward, from stage + 1
};
const char* action_kind_name(ActionKind kind);
inline bool is_compute(ActionKind kind) {
  return kind == ActionKind::forward || kind == ActionKind::backward || kind == ActionKind::weight_gradient;
}

struct Action {
  ActionKind kind = ActionKind::forward;
  int stage = 0;            // the stage the action belongs to (its compute's stage)
  int64_t micro_batch = 0;
  // Send and receive: the stage at the other end (stage + 1 or stage - 1).
  int peer_stage = -1;

  bool operator==(const Action& other) const {
    return kind == other.kind && stage == other.stage && micro_batch == other.micro_batch &&
           peer_stage == other.peer_stage;
  }
};
// "F3.1" (forward of stage 3, micro-batch 1), "B3.1", "W3.1", "sA3>4.1", "rA3<2.1", "sG3>2.1", "rG3<4.1".
std::string describe(const Action& action);

struct PipelineShape {
  Schedule schedule = Schedule::one_f_one_b;
  int pp = 1;              // pipeline ranks
  int virtual_stages = 1;  // chunks per rank (interleaved only)
  int64_t micro_batches = 1;

  int stages() const { return pp * virtual_stages; }
  int rank_of_stage(int stage) const { return stage % pp; }
};

// The pipeline of `layout` over `micro_batches` micro-batches per step.
PipelineShape pipeline_shape(const Layout& layout, int64_t micro_batches);

// ConfigError naming the key and the rule when the shape cannot be
// scheduled: parallel.pp or parallel.virtual_stages below 1,
// parallel.virtual_stages > 1 without the interleaved schedule, interleaved
// with pp < 2 (parallel.schedule), fewer than one micro-batch, or
// interleaved with a micro-batch count that is not a multiple of pp (both
// named as train.global_batch, which sets the count with parallel.dp and
// train.micro_batch). Interleaved with v = 1 is allowed and runs 1F1B's
// order.
// forward_only: the rules of a forward-only run (any micro-batch count).
void check_pipeline_shape(const PipelineShape& shape, bool forward_only = false);

struct PipelineSchedule {
  PipelineShape shape;
  bool forward_only = false;               // evaluation: forwards (and their activations' traffic) only
  std::vector<std::vector<Action>> ranks;  // [pp rank] -> its actions in order
};

// Compute actions only. Both generators call check_pipeline_shape first.
// GPipe: every forward, then the backwards in reverse micro-batch order.
// 1F1B: p - r - 1 warm-up forwards on rank r (at most m), then one forward
// and one backward alternately, then the remaining backwards.
// Interleaved: Megatron's order, (p - r - 1) x 2 + (v - 1) x p warm-up
// forwards over the chunks in groups of p micro-batches.
PipelineSchedule generate_schedule(const PipelineShape& shape);
// Forward only (evaluation): each rank runs its stages' forwards, chunk by
// chunk, each over every micro-batch in order, for any micro-batch count
// (interleaved too: the multiple of pp is a rule of training's order).
// Lowered like the others.
PipelineSchedule generate_forward_only(const PipelineShape& shape);

// Adds the sends and receives (see the top of this file). The input must
// hold compute actions only (lowering twice is an error, not a no-op).
PipelineSchedule lower_communication(const PipelineSchedule& compute);

// The receive a compute action needs posted before it (its input comes
// from a stage on another rank): rA s<s-1 for a forward of stage s > 0,
// rG s<s+1 for a backward of a stage before the last; none otherwise.
std::optional<Action> input_receive(const PipelineShape& shape, const Action& compute);
// The send of a compute action's output to a stage on another rank:
// sA s>s+1 after a forward before the last stage, sG s>s-1 after a
// backward of stage s > 0; none otherwise (weight gradients stay local).
std::optional<Action> output_send(const PipelineShape& shape, const Action& compute);

// For each stage in `actions` (one rank's list), the micro-batch of its
// last backward: the step's final gradient contribution to the stage's
// parameters (GPipe runs backwards in reverse, so there micro-batch 0's).
std::map<int, int64_t> last_backward_micro_batch(const std::vector<Action>& actions);

// Throws giant::Error naming the rule and the action when a lowered
// schedule is not valid: a stage on a rank other than rank_of_stage; each
// (stage, micro-batch) forward exactly once and, unless forward-only,
// backward exactly once, after its forward on that rank; weight gradients
// either for none or for every backward, each once, after it; every send
// matched by exactly one receive of the same tensor on the peer's rank,
// every receive by a send; a send after the compute producing it; a
// receive before the compute that consumes it, and none missing. The
// message reads "invalid pipeline schedule (rule: RULE): ..." and names the
// action with describe(). It checks order and matching only: whether the
// ranks can run their lists without deadlock is the simulator's to say.
void validate_schedule(const PipelineSchedule& lowered);

}  // namespace giant
