// simulate_schedule: every rank runs its list in order; a compute waits for
// the rank and for its inputs, and finishing one wakes the rank that waits
// for it, so the whole step costs one pass over the actions.
#include <algorithm>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/planner/schedule_simulate.h"

namespace giant::planner {

namespace {

constexpr double kNotYet = -1;

class Simulator {
 public:
  Simulator(const PipelineSchedule& lowered, const ActionCosts& costs, bool timeline)
      : s_(lowered),
        shape_(lowered.shape),
        costs_(costs),
        stages_(shape_.stages()),
        timeline_(timeline),
        // Inputs come from neighbouring stages, on other ranks whenever p > 1.
        neighbour_transfer_s_(shape_.pp > 1 ? costs.transfer_s : 0) {
    for (int stage = 0; stage < stages_; ++stage) rank_of_stage_.push_back(shape_.rank_of_stage(stage));
    const size_t slots = static_cast<size_t>(stages_) * static_cast<size_t>(shape_.micro_batches);
    forward_end_.assign(slots, kNotYet);
    backward_end_.assign(slots, kNotYet);
    forward_arrival_.assign(slots, kNotYet);
    backward_arrival_.assign(slots, kNotYet);
    link_free_at_.assign(static_cast<size_t>(shape_.pp) * static_cast<size_t>(shape_.pp), 0);
    next_.assign(static_cast<size_t>(shape_.pp), 0);
    free_at_.assign(static_cast<size_t>(shape_.pp), 0);
    queued_.assign(static_cast<size_t>(shape_.pp), true);
    in_flight_.assign(static_cast<size_t>(stages_), 0);
    result_.busy_s.assign(static_cast<size_t>(shape_.pp), 0);
    result_.peak_in_flight.assign(static_cast<size_t>(stages_), 0);
    if (!timeline_) return;
    result_.timeline.resize(static_cast<size_t>(shape_.pp));
    for (int r = 0; r < shape_.pp; ++r) result_.timeline[r].reserve(s_.ranks[r].size());
  }

  SimulationResult run() {
    std::vector<int> ready;
    for (int r = shape_.pp - 1; r >= 0; --r) ready.push_back(r);
    while (!ready.empty()) {
      const int r = ready.back();
      ready.pop_back();
      queued_[r] = false;
      advance(r, ready);
    }
    finish();
    return std::move(result_);
  }

 private:
  size_t slot(const Action& a) const { return static_cast<size_t>(a.stage) * shape_.micro_batches + a.micro_batch; }

  // When an output that was ready at `end` on rank `from` is at rank `to`:
  // transfers between two ranks go one after another in each direction
  // (one link; a transfer longer than the compute between two sends makes
  // the next wait), each transfer_s long.
  double send(int from, int to, double end) {
    if (from == to || neighbour_transfer_s_ <= 0) return end;
    double& free_at = link_free_at_[static_cast<size_t>(from) * shape_.pp + to];
    free_at = std::max(end, free_at) + neighbour_transfer_s_;
    return free_at;
  }

  // When a compute's inputs are there, kNotYet while one is not.
  double inputs_ready(const Action& a) const {
    const size_t self = slot(a);
    const auto m = static_cast<size_t>(shape_.micro_batches);
    switch (a.kind) {
      case ActionKind::forward: return a.stage == 0 ? 0 : forward_arrival_[self - m];
      case ActionKind::backward: {
        const double own = forward_end_[self];
        if (own == kNotYet || a.stage == stages_ - 1) return own;
        const double after = backward_arrival_[self + m];
        return after == kNotYet ? kNotYet : std::max(own, after);
      }
      default: return backward_end_[self];
    }
  }

  double cost(const Action& a) const {
    const auto stage = static_cast<size_t>(a.stage);
    switch (a.kind) {
      case ActionKind::forward: return costs_.forward_s[stage];
      case ActionKind::backward: return costs_.backward_s[stage];
      default:
        GIANT_CHECK(stage < costs_.weight_gradient_s.size(), "the schedule has weight gradients (",
                    describe(a), ") but the costs give weight_gradient_s for ", costs_.weight_gradient_s.size(),
                    " of ", stages_, " stages");
        return costs_.weight_gradient_s[stage];
    }
  }

  void check_runnable(const Action& a, int r) const {
    GIANT_CHECK(a.stage >= 0 && a.stage < stages_ && a.micro_batch >= 0 && a.micro_batch < shape_.micro_batches,
                describe(a), " on rank ", r, " is outside ", stages_, " stages x ", shape_.micro_batches,
                " micro-batches");
    GIANT_CHECK(rank_of_stage_[a.stage] == r, describe(a), " is on rank ", r, " but its stage runs on rank ",
                rank_of_stage_[a.stage]);
  }

  // Runs rank r's list until it ends or a compute's input is missing.
  void advance(int r, std::vector<int>& ready) {
    const std::vector<Action>& list = s_.ranks[r];
    std::vector<TimedAction>* timeline = timeline_ ? &result_.timeline[r] : nullptr;
    while (next_[r] < list.size()) {
      const Action& a = list[next_[r]];
      check_runnable(a, r);
      if (!is_compute(a.kind)) {  // posted or issued at once, no rank time
        if (timeline) timeline->push_back({a, free_at_[r], free_at_[r]});
        ++next_[r];
        continue;
      }
      const double inputs = inputs_ready(a);
      if (inputs == kNotYet) return;
      const double duration = cost(a);
      const double start = std::max(inputs, free_at_[r]), end = start + duration;
      if (timeline) timeline->push_back({a, start, end});
      free_at_[r] = end;
      result_.busy_s[r] += duration;
      ++next_[r];
      record(a, end, ready);
    }
  }

  // Marks a compute done and wakes the rank of the stage that consumes it.
  void record(const Action& a, double end, std::vector<int>& ready) {
    const size_t self = slot(a);
    int consumer = -1;
    if (a.kind == ActionKind::forward) {
      forward_end_[self] = end;
      if (!s_.forward_only) {
        const int64_t now = ++in_flight_[a.stage];
        result_.peak_in_flight[a.stage] = std::max(result_.peak_in_flight[a.stage], now);
      }
      if (a.stage + 1 < stages_) consumer = a.stage + 1;
    } else if (a.kind == ActionKind::backward) {
      backward_end_[self] = end;
      --in_flight_[a.stage];
      if (a.stage > 0) consumer = a.stage - 1;
    }
    if (consumer < 0) return;  // a weight gradient feeds no other action
    const int rank = rank_of_stage_[consumer];
    const double arrival = send(rank_of_stage_[a.stage], rank, end);
    (a.kind == ActionKind::forward ? forward_arrival_ : backward_arrival_)[self] = arrival;
    if (!queued_[rank]) {
      queued_[rank] = true;
      ready.push_back(rank);
    }
  }

  // What a blocked compute waits for, in words.
  std::string waits_for(const Action& a) const {
    const size_t self = slot(a);
    Action needed = a;
    if (a.kind == ActionKind::forward) {
      needed.stage = a.stage - 1;
    } else if (a.kind == ActionKind::backward) {
      needed.kind = forward_end_[self] == kNotYet ? ActionKind::forward : ActionKind::backward;
      if (needed.kind == ActionKind::backward) needed.stage = a.stage + 1;
    } else {
      needed.kind = ActionKind::backward;
    }
    const int rank = shape_.rank_of_stage(needed.stage);
    return describe(needed) + " (rank " + std::to_string(rank) + ")";
  }

  void finish() {
    std::string blocked;
    for (int r = 0; r < shape_.pp; ++r) {
      if (next_[r] >= s_.ranks[r].size()) continue;
      const Action& a = s_.ranks[r][next_[r]];
      blocked += (blocked.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " at " + describe(a) +
                 " (action " + std::to_string(next_[r]) + ") waits for " + waits_for(a);
    }
    result_.deadlocked = !blocked.empty();
    if (result_.deadlocked) result_.deadlock = "pipeline schedule deadlocked: " + blocked;
    result_.step_s = *std::max_element(free_at_.begin(), free_at_.end());
    double busy = 0;
    for (double b : result_.busy_s) busy += b;
    result_.bubble_fraction = result_.step_s > 0 ? 1 - busy / (shape_.pp * result_.step_s) : 0;
  }

  const PipelineSchedule& s_;
  const PipelineShape& shape_;
  const ActionCosts& costs_;
  const int stages_;
  const bool timeline_;
  const double neighbour_transfer_s_;
  std::vector<int> rank_of_stage_;  // [stage]
  std::vector<double> forward_end_, backward_end_;  // [stage * m + micro]
  // When each output is at the rank of its consumer (the next or previous stage).
  std::vector<double> forward_arrival_, backward_arrival_;  // [stage * m + micro]
  std::vector<double> link_free_at_;                        // [from rank * p + to rank]
  std::vector<size_t> next_;                                     // [rank] its next action
  std::vector<double> free_at_;                                  // [rank] when its last compute ends
  std::vector<bool> queued_;                                     // [rank] in the ready list
  std::vector<int64_t> in_flight_;                               // [stage]
  SimulationResult result_;
};

}  // namespace

SimulationResult simulate_schedule(const PipelineSchedule& lowered, const ActionCosts& costs) {
  return simulate_schedule(lowered, costs, SimulationOptions{});
}

SimulationResult simulate_schedule(const PipelineSchedule& lowered, const ActionCosts& costs,
                                   const SimulationOptions& options) {
  const PipelineShape& shape = lowered.shape;
  check_pipeline_shape(shape, lowered.forward_only);
  const size_t stages = static_cast<size_t>(shape.stages());
  GIANT_CHECK(static_cast<int>(lowered.ranks.size()) == shape.pp, "expected ", shape.pp, " rank lists, got ",
              lowered.ranks.size());
  GIANT_CHECK(costs.forward_s.size() == stages && (lowered.forward_only || costs.backward_s.size() == stages),
              "expected forward and backward costs for ", stages, " stages, got ", costs.forward_s.size(), " and ",
              costs.backward_s.size());
  return Simulator(lowered, costs, options.timeline).run();
}

ActionCosts ActionCosts::uniform(int stages, double forward_s, double backward_s, double transfer_s) {
  ActionCosts c;
  c.forward_s.assign(static_cast<size_t>(stages), forward_s);
  c.backward_s.assign(static_cast<size_t>(stages), backward_s);
  c.transfer_s = transfer_s;
  return c;
}

double pipeline_closed_form_s(int p, int v, int64_t m, Schedule schedule, double f, double b) {
  const double per_micro = f + b;
  if (schedule == Schedule::interleaved) return m * per_micro + (p - 1) * per_micro / v;
  return (m + p - 1) * per_micro;
}

}  // namespace giant::planner
