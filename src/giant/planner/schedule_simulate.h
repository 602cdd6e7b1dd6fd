// The planner's pipeline simulator over the schedule IR (layout/schedule.h):
// what each action costs, the timeline the ranks run to, the grid that draws
// it, and the closed form the search ranks layouts by.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "giant/layout/schedule.h"

namespace giant::planner {

// Seconds per action, by stage (one micro-batch).
struct ActionCosts {
  std::vector<double> forward_s;          // [stage]
  std::vector<double> backward_s;         // [stage]
  std::vector<double> weight_gradient_s;  // [stage]; empty: none
  double transfer_s = 0;                  // one activation or gradient between ranks, alone on the link
  // Equal costs for every stage.
  static ActionCosts uniform(int stages, double forward_s, double backward_s, double transfer_s = 0);
};

struct TimedAction {
  Action action;
  double start_s = 0, end_s = 0;  // compute; a send or receive: when it was issued (both)
};

struct SimulationResult {
  bool deadlocked = false;
  std::string deadlock;        // when deadlocked: what each blocked rank waits for
  double step_s = 0;           // until the last rank's last action ends
  double bubble_fraction = 0;  // idle share of ranks x step_s: 1 - busy / (p step_s)
  std::vector<double> busy_s;  // [rank] compute seconds
  // [stage] the most micro-batches whose forward ran and whose backward has
  // not yet (the activations a stage keeps at once); all 0 forward-only,
  // where nothing is kept for a backward.
  std::vector<int64_t> peak_in_flight;
  std::vector<std::vector<TimedAction>> timeline;  // [rank] in order
};

// Runs every rank's lowered list: a compute starts when the rank is free and
// its input has arrived (its end on the same rank; on another, a transfer
// of transfer_s at a link's full rate: each rank's link carries what it
// sends and what it receives at that rate, shared evenly by the transfers
// on it at once, so a middle stage sending activations on and gradients
// back gives each half; between two ranks they go one at a time in each
// direction; a backward also after its own forward, a weight gradient
// after its backward); sends
// and receives take no rank time, so the compute lists alone (before
// lowering) run to the same times. Costs need one entry per stage
// (weight_gradient_s only when the schedule has weight gradients). When no
// rank can go on, the result is deadlocked and says, for each rank left,
// the action it stands at and what that waits for. Validate a hand-made
// schedule first: the simulator checks only what it needs to run (each
// stage on its rank, indices in range).
SimulationResult simulate_schedule(const PipelineSchedule& lowered, const ActionCosts& costs);

struct SimulationOptions {
  // false: leave SimulationResult::timeline empty. Writing it costs several
  // times the rest of the simulation, and the search, which simulates
  // hundreds of layouts, needs only the step, the bubble and the busy times.
  bool timeline = true;
};
SimulationResult simulate_schedule(const PipelineSchedule& lowered, const ActionCosts& costs,
                                   const SimulationOptions& options);

// The timeline as a grid, one row per rank, one column per `column_s`
// seconds (0: the shortest compute action), each cell the compute running at
// the column's middle: its label ("F3.1"-style, cut to cell_width - 1
// characters) where it begins, dashes where it goes on, blank when idle; a
// header with the schedule, p, v, m, the step time and the bubble. One
// line per rank however long: page wide grids with `less -S`.
std::string render_schedule_grid(const PipelineSchedule& lowered, const SimulationResult& simulated,
                                 double column_s = 0, int cell_width = 6);

// The closed form for equal stages: (m + p - 1)(f + b) for GPipe and 1F1B,
// m (f + b) + (p - 1)(f + b) / v interleaved, where f and b are a rank's
// time per micro-batch (all its chunks); transfers ignored. What the search
// ranks every layout by before simulating the best.
double pipeline_closed_form_s(int pp, int virtual_stages, int64_t micro_batches, Schedule schedule,
                              double rank_forward_s, double rank_backward_s);

}  // namespace giant::planner
