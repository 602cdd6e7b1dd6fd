// simulate_schedule: time moves from event to event (a compute ends, a
// transfer arrives); at each, the ranks it concerns start their next compute
// if its inputs are there. Transfers are a fluid: each rank's link carries
// what it sends and what it receives at its full rate, shared evenly by the
// transfers on it at once; between two ranks they go one after another
// (one TCP stream, in order).
#include <algorithm>
#include <deque>
#include <queue>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/planner/schedule_simulate.h"

namespace giant::planner {

namespace {

constexpr double kNotYet = -1;

// A transfer between two ranks: what is left of it, in seconds at the full
// rate, and whose input it is once there.
struct Transfer {
  double left_s = 0;
  size_t slot = 0;
  bool gradient = false;
};

// Transfers under way between ranks, sharing each rank's link.
class Links {
 public:
  explicit Links(int ranks)
      : ranks_(ranks), queues_(static_cast<size_t>(ranks) * ranks),
        sending_(ranks, 0), receiving_(ranks, 0) {}

  void start(int from, int to, const Transfer& t) {
    const size_t pair = static_cast<size_t>(from) * ranks_ + to;
    if (queues_[pair].empty()) {
      active_.push_back(pair);
      ++sending_[from];
      ++receiving_[to];
    }
    queues_[pair].push_back(t);
  }

  bool idle() const { return active_.empty(); }

  // When the first transfer under way ends at the present shares.
  double next_end_s(double now) const {
    double next = -1;
    for (size_t pair : active_) {
      const double end = now + queues_[pair].front().left_s / rate(pair);
      if (next < 0 || end < next) next = end;
    }
    return next;
  }

  // Moves every transfer under way on from `now` to `then` (no later than
  // next_end_s); calls arrived(to, transfer) for each that ends by then, and
  // starts the next between its ranks.
  template <typename Arrived>
  void advance(double now, double then, Arrived&& arrived) {
    std::vector<size_t> ended;
    for (size_t pair : active_) {
      Transfer& head = queues_[pair].front();
      const double rate_now = rate(pair);
      if (now + head.left_s / rate_now <= then) {
        ended.push_back(pair);
      } else {
        head.left_s -= (then - now) * rate_now;
      }
    }
    for (size_t pair : ended) {
      const int from = static_cast<int>(pair / ranks_), to = static_cast<int>(pair % ranks_);
      arrived(to, queues_[pair].front());
      queues_[pair].pop_front();
      if (!queues_[pair].empty()) continue;
      active_.erase(std::find(active_.begin(), active_.end(), pair));
      --sending_[from];
      --receiving_[to];
    }
  }

 private:
  double rate(size_t pair) const {
    const size_t from = pair / ranks_, to = pair % ranks_;
    return 1.0 / std::max(sending_[from], receiving_[to]);
  }

  const int ranks_;
  std::vector<std::deque<Transfer>> queues_;  // [from * ranks + to], the head under way
  std::vector<size_t> active_;                // pairs with a transfer under way
  std::vector<int> sending_, receiving_;      // [rank] transfers under way on its link
};

class Simulator {
 public:
  Simulator(const PipelineSchedule& lowered, const ActionCosts& costs, bool timeline)
      : s_(lowered),
        shape_(lowered.shape),
        costs_(costs),
        stages_(shape_.stages()),
        timeline_(timeline),
        // Inputs come from neighbouring stages, on other ranks whenever p > 1.
        neighbour_transfer_s_(shape_.pp > 1 ? costs.transfer_s : 0),
        links_(shape_.pp) {
    for (int stage = 0; stage < stages_; ++stage) rank_of_stage_.push_back(shape_.rank_of_stage(stage));
    const size_t slots = static_cast<size_t>(stages_) * static_cast<size_t>(shape_.micro_batches);
    forward_end_.assign(slots, kNotYet);
    backward_end_.assign(slots, kNotYet);
    forward_arrival_.assign(slots, kNotYet);
    backward_arrival_.assign(slots, kNotYet);
    const auto ranks = static_cast<size_t>(shape_.pp);
    next_.assign(ranks, 0);
    free_at_.assign(ranks, 0);
    busy_.assign(ranks, false);
    in_flight_.assign(static_cast<size_t>(stages_), 0);
    result_.busy_s.assign(ranks, 0);
    result_.peak_in_flight.assign(static_cast<size_t>(stages_), 0);
    if (!timeline_) return;
    result_.timeline.resize(ranks);
    for (int r = 0; r < shape_.pp; ++r) result_.timeline[r].reserve(s_.ranks[r].size());
  }

  SimulationResult run() {
    for (int r = 0; r < shape_.pp; ++r) try_start(r);
    while (!computing_.empty() || !links_.idle()) {
      double next = computing_.empty() ? -1 : computing_.top().first;
      const double transfer_end = links_.idle() ? -1 : links_.next_end_s(now_);
      if (next < 0 || (transfer_end >= 0 && transfer_end < next)) next = transfer_end;
      std::vector<int> woken;
      links_.advance(now_, next, [&](int to, const Transfer& t) {
        (t.gradient ? backward_arrival_ : forward_arrival_)[t.slot] = next;
        woken.push_back(to);
      });
      now_ = next;
      while (!computing_.empty() && computing_.top().first <= now_) {
        const int r = computing_.top().second;
        computing_.pop();
        finish_compute(r, woken);
      }
      std::sort(woken.begin(), woken.end());
      woken.erase(std::unique(woken.begin(), woken.end()), woken.end());
      for (int r : woken) try_start(r);
    }
    finish();
    return std::move(result_);
  }

 private:
  size_t slot(const Action& a) const { return static_cast<size_t>(a.stage) * shape_.micro_batches + a.micro_batch; }

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

  // Starts rank r's next compute if it is idle and the compute's inputs are
  // there, passing the sends and receives before it (they take no rank time).
  void try_start(int r) {
    if (busy_[r]) return;
    const std::vector<Action>& list = s_.ranks[r];
    std::vector<TimedAction>* timeline = timeline_ ? &result_.timeline[r] : nullptr;
    while (next_[r] < list.size()) {
      const Action& a = list[next_[r]];
      check_runnable(a, r);
      if (is_compute(a.kind)) break;
      if (timeline) timeline->push_back({a, free_at_[r], free_at_[r]});
      ++next_[r];
    }
    if (next_[r] >= list.size()) return;
    const Action& a = list[next_[r]];
    const double inputs = inputs_ready(a);
    if (inputs == kNotYet) return;
    const double duration = cost(a);
    const double start = std::max({inputs, free_at_[r], now_}), end = start + duration;
    if (timeline) timeline->push_back({a, start, end});
    free_at_[r] = end;
    result_.busy_s[r] += duration;
    busy_[r] = true;
    computing_.push({end, r});
  }

  // Rank r's compute has ended: marks it done and sends its output to the
  // rank of the stage that consumes it.
  void finish_compute(int r, std::vector<int>& woken) {
    const Action& a = s_.ranks[r][next_[r]];
    ++next_[r];
    busy_[r] = false;
    woken.push_back(r);
    const size_t self = slot(a);
    int consumer = -1;
    if (a.kind == ActionKind::forward) {
      forward_end_[self] = now_;
      if (!s_.forward_only) {
        const int64_t now = ++in_flight_[a.stage];
        result_.peak_in_flight[a.stage] = std::max(result_.peak_in_flight[a.stage], now);
      }
      if (a.stage + 1 < stages_) consumer = a.stage + 1;
    } else if (a.kind == ActionKind::backward) {
      backward_end_[self] = now_;
      --in_flight_[a.stage];
      if (a.stage > 0) consumer = a.stage - 1;
    }
    if (consumer < 0) return;  // a weight gradient feeds no other action
    const int to = rank_of_stage_[consumer];
    const bool gradient = a.kind == ActionKind::backward;
    if (to == r || neighbour_transfer_s_ <= 0) {
      (gradient ? backward_arrival_ : forward_arrival_)[self] = now_;
      woken.push_back(to);
      return;
    }
    links_.start(r, to, Transfer{neighbour_transfer_s_, self, gradient});
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
  Links links_;
  double now_ = 0;
  std::vector<int> rank_of_stage_;  // [stage]
  std::vector<double> forward_end_, backward_end_;  // [stage * m + micro]
  // When each output is at the rank of its consumer (the next or previous stage).
  std::vector<double> forward_arrival_, backward_arrival_;  // [stage * m + micro]
  std::vector<size_t> next_;    // [rank] its next action (while busy_, the compute running)
  std::vector<double> free_at_;  // [rank] when its last compute ends
  std::vector<bool> busy_;       // [rank] computing
  // (end, rank) of the computes running, the earliest on top.
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>> computing_;
  std::vector<int64_t> in_flight_;  // [stage]
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
