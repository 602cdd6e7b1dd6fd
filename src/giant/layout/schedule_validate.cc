// validate_schedule: the rules a lowered schedule must keep, each failure
// naming its rule and the action (schedule.h lists them).
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/layout/schedule.h"

namespace giant {

namespace {

constexpr int64_t kAbsent = -1;
constexpr int kKinds = 7;

[[noreturn]] void broken(const std::string& rule, const std::string& detail) {
  throw Error("invalid pipeline schedule (rule: " + rule + "): " + detail);
}

// Where each action of each (stage, micro-batch) stands in its rank's list:
// position[kind][stage * m + micro], kAbsent when the list lacks it. The
// stage fixes the rank, so one position per slot says both.
class Positions {
 public:
  explicit Positions(const PipelineShape& shape)
      : shape_(shape), slots_(static_cast<size_t>(shape.stages()) * static_cast<size_t>(shape.micro_batches)) {
    for (auto& p : position_) p.assign(slots_, kAbsent);
  }
  size_t slot(int stage, int64_t micro) const { return static_cast<size_t>(stage) * shape_.micro_batches + micro; }
  int64_t& at(ActionKind kind, int stage, int64_t micro) {
    return position_[static_cast<int>(kind)][slot(stage, micro)];
  }
  int64_t at(const Action& a) const { return position_[static_cast<int>(a.kind)][slot(a.stage, a.micro_batch)]; }
  bool has(const Action& a) const { return at(a) != kAbsent; }

 private:
  const PipelineShape& shape_;
  size_t slots_;
  std::vector<int64_t> position_[kKinds];
};

std::string where(const PipelineShape& shape, const Action& a, int64_t position) {
  return describe(a) + " (rank " + std::to_string(shape.rank_of_stage(a.stage)) + ", action " +
         std::to_string(position) + ")";
}

const char* once_rule(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return "each forward once";
    case ActionKind::backward: return "each backward once";
    case ActionKind::weight_gradient: return "each weight gradient once";
    case ActionKind::send_activation:
    case ActionKind::send_gradient: return "each send once";
    default: return "each receive once";
  }
}

bool is_gradient_kind(ActionKind kind) {
  return kind == ActionKind::backward || kind == ActionKind::weight_gradient ||
         kind == ActionKind::send_gradient || kind == ActionKind::recv_gradient;
}

// The stage a send or receive must name as its peer.
int expected_peer(const Action& a) {
  const bool towards_next = a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_gradient;
  return towards_next ? a.stage + 1 : a.stage - 1;
}

// Ranges, ranks, peers and duplicates, in list order; records positions.
void check_each_action(const PipelineSchedule& s, Positions& positions, bool& has_weight_gradients) {
  const PipelineShape& shape = s.shape;
  for (int r = 0; r < shape.pp; ++r) {
    const auto& list = s.ranks[r];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      const std::string at = describe(a) + " (rank " + std::to_string(r) + ", action " + std::to_string(i) + ")";
      if (a.stage < 0 || a.stage >= shape.stages() || a.micro_batch < 0 || a.micro_batch >= shape.micro_batches)
        broken("stage and micro-batch in range", at + " is outside " + std::to_string(shape.stages()) +
                                                     " stages x " + std::to_string(shape.micro_batches) +
                                                     " micro-batches");
      if (shape.rank_of_stage(a.stage) != r)
        broken("stage on its rank", at + ": stage " + std::to_string(a.stage) + " runs on rank " +
                                        std::to_string(shape.rank_of_stage(a.stage)));
      if (s.forward_only && is_gradient_kind(a.kind))
        broken("forward only", at + " in a forward-only schedule");
      if (!is_compute(a.kind)) {
        const int peer = expected_peer(a);
        if (a.peer_stage != peer || peer < 0 || peer >= shape.stages())
          broken("peer is the adjacent stage", at + " should name stage " + std::to_string(peer) +
                                                   (peer < 0 || peer >= shape.stages() ? ", which does not exist"
                                                                                       : ""));
        if (shape.rank_of_stage(peer) == r)
          broken("peer on another rank", at + ": stage " + std::to_string(peer) + " is on the same rank");
      }
      has_weight_gradients = has_weight_gradients || a.kind == ActionKind::weight_gradient;
      int64_t& position = positions.at(a.kind, a.stage, a.micro_batch);
      if (position != kAbsent)
        broken(once_rule(a.kind), at + " appears twice (also action " + std::to_string(position) + ")");
      position = static_cast<int64_t>(i);
    }
  }
}

// Every compute present, each after the one it needs on its rank.
void check_computes(const PipelineSchedule& s, const Positions& positions, bool has_weight_gradients) {
  const PipelineShape& shape = s.shape;
  for (int stage = 0; stage < shape.stages(); ++stage) {
    for (int64_t j = 0; j < shape.micro_batches; ++j) {
      auto missing = [&](const std::string& rule, ActionKind kind) {
        Action a;
        a.kind = kind, a.stage = stage, a.micro_batch = j;
        broken(rule, describe(a) + " is missing from rank " + std::to_string(shape.rank_of_stage(stage)));
      };
      Action f, b, w;
      f.stage = b.stage = w.stage = stage;
      f.micro_batch = b.micro_batch = w.micro_batch = j;
      b.kind = ActionKind::backward, w.kind = ActionKind::weight_gradient;
      if (!positions.has(f)) missing("each forward once", ActionKind::forward);
      if (s.forward_only) continue;
      if (!positions.has(b)) missing("each backward once", ActionKind::backward);
      if (positions.at(b) < positions.at(f))
        broken("backward after its forward",
               where(shape, b, positions.at(b)) + " comes before " + describe(f) + " (action " +
                   std::to_string(positions.at(f)) + ")");
      if (!has_weight_gradients) continue;
      if (!positions.has(w)) missing("weight gradients for every backward", ActionKind::weight_gradient);
      if (positions.at(w) < positions.at(b))
        broken("weight gradient after its backward",
               where(shape, w, positions.at(w)) + " comes before " + describe(b) + " (action " +
                   std::to_string(positions.at(b)) + ")");
    }
  }
}

// A send's receive on the peer: the same tensor seen from the other end.
Action matching(const Action& a) {
  static constexpr ActionKind kOther[kKinds] = {
      ActionKind::forward,         ActionKind::backward,        ActionKind::weight_gradient,
      ActionKind::recv_activation, ActionKind::send_activation, ActionKind::recv_gradient,
      ActionKind::send_gradient};
  Action m = a;
  m.kind = kOther[static_cast<int>(a.kind)];
  m.stage = a.peer_stage;
  m.peer_stage = a.stage;
  return m;
}

// Sends and receives paired; each send after its compute, each receive
// before its consumer, none missing.
void check_transfers(const PipelineSchedule& s, const Positions& positions) {
  const PipelineShape& shape = s.shape;
  for (int r = 0; r < shape.pp; ++r) {
    for (const Action& a : s.ranks[r]) {
      if (is_compute(a.kind)) continue;
      const bool send = a.kind == ActionKind::send_activation || a.kind == ActionKind::send_gradient;
      const Action other = matching(a);
      if (!positions.has(other))
        broken(send ? "send matched by a receive" : "receive matched by a send",
               where(shape, a, positions.at(a)) + " has no " + describe(other) + " on rank " +
                   std::to_string(shape.rank_of_stage(other.stage)));
    }
  }
  for (int r = 0; r < shape.pp; ++r) {
    const auto& list = s.ranks[r];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& c = list[i];
      if (!is_compute(c.kind)) continue;
      const int64_t here = static_cast<int64_t>(i);
      if (const auto recv = input_receive(shape, c)) {
        if (!positions.has(*recv))
          broken("input received", where(shape, c, here) + " needs " + describe(*recv) + " posted before it");
        if (positions.at(*recv) > here)
          broken("receive before its consumer", where(shape, *recv, positions.at(*recv)) + " comes after " +
                                                    describe(c) + " (action " + std::to_string(i) + ")");
      }
      if (const auto send = output_send(shape, c)) {
        if (positions.has(*send) && positions.at(*send) < here)
          broken("send after its compute", where(shape, *send, positions.at(*send)) + " comes before " +
                                               describe(c) + " (action " + std::to_string(i) + ")");
      }
    }
  }
}

}  // namespace

void validate_schedule(const PipelineSchedule& s) {
  check_pipeline_shape(s.shape, s.forward_only);
  if (static_cast<int>(s.ranks.size()) != s.shape.pp)
    broken("one list per rank", std::to_string(s.ranks.size()) + " lists for pp = " + std::to_string(s.shape.pp));
  Positions positions(s.shape);
  bool has_weight_gradients = false;
  check_each_action(s, positions, has_weight_gradients);
  check_computes(s, positions, has_weight_gradients);
  check_transfers(s, positions);
}

}  // namespace giant
