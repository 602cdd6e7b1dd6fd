// Schedule vocabulary, the shape check, the generators and the lowering
// pass (the validator lives in schedule_validate.cc; the simulator and the
// grid in the planner).
#include "giant/layout/schedule.h"

#include <algorithm>
#include <string>

#include "giant/base/error.h"

namespace giant {

namespace {

Action compute_action(ActionKind kind, int stage, int64_t micro_batch) {
  Action a;
  a.kind = kind;
  a.stage = stage;
  a.micro_batch = micro_batch;
  return a;
}

Action transfer_action(ActionKind kind, int stage, int peer_stage, int64_t micro_batch) {
  Action a = compute_action(kind, stage, micro_batch);
  a.peer_stage = peer_stage;
  return a;
}

// The order in which rank r runs its compute actions in a training step.
std::vector<Action> training_order(const PipelineShape& shape, int r) {
  const int p = shape.pp, v = shape.virtual_stages;
  const int64_t m = shape.micro_batches;
  std::vector<Action> ops;
  ops.reserve(static_cast<size_t>(2 * m * v));
  if (shape.schedule == Schedule::gpipe) {
    for (int64_t j = 0; j < m; ++j) ops.push_back(compute_action(ActionKind::forward, r, j));
    for (int64_t j = m - 1; j >= 0; --j) ops.push_back(compute_action(ActionKind::backward, r, j));
    return ops;
  }
  // Interleaved (1F1B is v = 1): the k-th forward of a rank is local chunk
  // (k / p) % v of micro-batch (k / (p v)) p + k % p; backwards walk the
  // chunks in reverse. Megatron's order, which needs m to be a multiple of
  // p when v > 1.
  const int64_t total = m * v;
  auto micro_of = [&](int64_t k) { return (k / (int64_t{p} * v)) * p + k % p; };
  auto forward = [&](int64_t k) {
    const int chunk = static_cast<int>((k / p) % v);
    return compute_action(ActionKind::forward, chunk * p + r, micro_of(k));
  };
  auto backward = [&](int64_t k) {
    const int chunk = v - 1 - static_cast<int>((k / p) % v);
    return compute_action(ActionKind::backward, chunk * p + r, micro_of(k));
  };
  const int64_t warmup = v == 1 ? std::min<int64_t>(p - r - 1, m)
                                : std::min<int64_t>(int64_t{p - r - 1} * 2 + int64_t{v - 1} * p, total);
  int64_t f = 0, b = 0;
  for (; f < warmup; ++f) ops.push_back(forward(f));
  while (f < total) {
    ops.push_back(forward(f++));
    ops.push_back(backward(b++));
  }
  while (b < total) ops.push_back(backward(b++));
  return ops;
}

// Neighbouring stages s and s + 1 are on ranks s % p and (s + 1) % p:
// different ones whenever there is more than one rank.
bool neighbours_on_other_ranks(const PipelineShape& shape) { return shape.pp > 1; }

}  // namespace

const char* action_kind_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return "forward";
    case ActionKind::backward: return "backward";
    case ActionKind::weight_gradient: return "weight_gradient";
    case ActionKind::send_activation: return "send_activation";
    case ActionKind::recv_activation: return "recv_activation";
    case ActionKind::send_gradient: return "send_gradient";
    case ActionKind::recv_gradient: return "recv_gradient";
  }
  return "?";
}

std::string describe(const Action& a) {
  const std::string stage = std::to_string(a.stage), micro = "." + std::to_string(a.micro_batch);
  const std::string peer = std::to_string(a.peer_stage);
  switch (a.kind) {
    case ActionKind::forward: return "F" + stage + micro;
    case ActionKind::backward: return "B" + stage + micro;
    case ActionKind::weight_gradient: return "W" + stage + micro;
    case ActionKind::send_activation: return "sA" + stage + ">" + peer + micro;
    case ActionKind::recv_activation: return "rA" + stage + "<" + peer + micro;
    case ActionKind::send_gradient: return "sG" + stage + ">" + peer + micro;
    case ActionKind::recv_gradient: return "rG" + stage + "<" + peer + micro;
  }
  return "?" + stage + micro;
}

PipelineShape pipeline_shape(const Layout& layout, int64_t micro_batches) {
  PipelineShape shape;
  shape.schedule = layout.schedule;
  shape.pp = layout.pp;
  shape.virtual_stages = layout.virtual_stages;
  shape.micro_batches = micro_batches;
  return shape;
}

void check_pipeline_shape(const PipelineShape& shape, bool forward_only) {
  const bool training = !forward_only;
  const std::string pp = std::to_string(shape.pp), v = std::to_string(shape.virtual_stages);
  const std::string m = std::to_string(shape.micro_batches);
  const bool interleaved = shape.schedule == Schedule::interleaved;
  if (shape.pp < 1) throw ConfigError("parallel.pp", "pipeline ranks must be at least 1, got " + pp);
  if (shape.virtual_stages < 1)
    throw ConfigError("parallel.virtual_stages", "chunks per pipeline rank must be at least 1, got " + v);
  if (shape.virtual_stages > 1 && !interleaved)
    throw ConfigError("parallel.virtual_stages", "virtual stages > 1 (got " + v +
                                                     ") need parallel.schedule = interleaved, not " +
                                                     schedule_name(shape.schedule));
  if (interleaved && shape.pp < 2)
    throw ConfigError("parallel.schedule", "the interleaved schedule needs parallel.pp >= 2, got " + pp);
  if (shape.micro_batches < 1)
    throw ConfigError("train.global_batch", "micro-batches per step = global_batch / (dp x micro_batch) must be "
                                            "at least 1, got " + m);
  if (training && interleaved && shape.micro_batches % shape.pp != 0)
    throw ConfigError("train.global_batch", "the interleaved schedule needs micro-batches per step = global_batch "
                                            "/ (dp x micro_batch) to be a multiple of parallel.pp = " + pp +
                                                ", got " + m);
}

PipelineSchedule generate_schedule(const PipelineShape& shape) {
  check_pipeline_shape(shape);
  PipelineSchedule s;
  s.shape = shape;
  s.ranks.resize(static_cast<size_t>(shape.pp));
  for (int r = 0; r < shape.pp; ++r) s.ranks[r] = training_order(shape, r);
  return s;
}

PipelineSchedule generate_forward_only(const PipelineShape& shape) {
  check_pipeline_shape(shape, /*forward_only=*/true);
  PipelineSchedule s;
  s.shape = shape;
  s.forward_only = true;
  s.ranks.resize(static_cast<size_t>(shape.pp));
  for (int r = 0; r < shape.pp; ++r) {
    auto& ops = s.ranks[r];
    ops.reserve(static_cast<size_t>(shape.micro_batches * shape.virtual_stages));
    for (int chunk = 0; chunk < shape.virtual_stages; ++chunk)
      for (int64_t j = 0; j < shape.micro_batches; ++j)
        ops.push_back(compute_action(ActionKind::forward, chunk * shape.pp + r, j));
  }
  return s;
}

std::optional<Action> input_receive(const PipelineShape& shape, const Action& c) {
  const int s = c.stage;
  if (c.kind == ActionKind::forward && s > 0 && neighbours_on_other_ranks(shape))
    return transfer_action(ActionKind::recv_activation, s, s - 1, c.micro_batch);
  if (c.kind == ActionKind::backward && s < shape.stages() - 1 && neighbours_on_other_ranks(shape))
    return transfer_action(ActionKind::recv_gradient, s, s + 1, c.micro_batch);
  return std::nullopt;
}

std::optional<Action> output_send(const PipelineShape& shape, const Action& c) {
  const int s = c.stage;
  if (c.kind == ActionKind::forward && s < shape.stages() - 1 && neighbours_on_other_ranks(shape))
    return transfer_action(ActionKind::send_activation, s, s + 1, c.micro_batch);
  if (c.kind == ActionKind::backward && s > 0 && neighbours_on_other_ranks(shape))
    return transfer_action(ActionKind::send_gradient, s, s - 1, c.micro_batch);
  return std::nullopt;
}

std::map<int, int64_t> last_backward_micro_batch(const std::vector<Action>& actions) {
  std::map<int, int64_t> last;
  for (const Action& a : actions)
    if (a.kind == ActionKind::backward) last[a.stage] = a.micro_batch;
  return last;
}

PipelineSchedule lower_communication(const PipelineSchedule& compute) {
  PipelineSchedule lowered;
  lowered.shape = compute.shape;
  lowered.forward_only = compute.forward_only;
  lowered.ranks.resize(compute.ranks.size());
  for (size_t r = 0; r < compute.ranks.size(); ++r) {
    const std::vector<Action>& in = compute.ranks[r];
    std::vector<Action>& out = lowered.ranks[r];
    out.reserve(3 * in.size());
    // The receive of compute i + 1 goes just before compute i, so that its
    // transfer overlaps compute i; the first compute's goes first.
    auto post_input_of = [&](size_t i) {
      if (i >= in.size()) return;
      if (const auto recv = input_receive(compute.shape, in[i])) out.push_back(*recv);
    };
    post_input_of(0);
    for (size_t i = 0; i < in.size(); ++i) {
      GIANT_CHECK(is_compute(in[i].kind), "lower_communication takes compute actions only, rank ", r, " holds ",
                  describe(in[i]));
      post_input_of(i + 1);
      out.push_back(in[i]);
      if (const auto send = output_send(compute.shape, in[i])) out.push_back(*send);
    }
  }
  return lowered;
}

}  // namespace giant
