// render_schedule_grid: a simulated timeline as text, time across, ranks down.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>

#include "giant/base/error.h"
#include "giant/planner/schedule_simulate.h"

namespace giant::planner {

namespace {

// More columns than this is a mistake (a column far shorter than the actions).
constexpr int64_t kMaxColumns = 1'000'000;

double shortest_compute_s(const SimulationResult& simulated) {
  double shortest = std::numeric_limits<double>::infinity();
  for (const auto& rank : simulated.timeline)
    for (const TimedAction& t : rank)
      if (is_compute(t.action.kind) && t.end_s > t.start_s) shortest = std::min(shortest, t.end_s - t.start_s);
  return std::isfinite(shortest) ? shortest : 1;
}

// Which compute of the rank runs at each column's middle (-1: idle).
std::vector<int64_t> running_per_column(const std::vector<TimedAction>& timeline, int64_t columns, double column_s) {
  std::vector<int64_t> running(static_cast<size_t>(columns), -1);
  size_t i = 0;
  for (int64_t k = 0; k < columns; ++k) {
    const double middle = (static_cast<double>(k) + 0.5) * column_s;
    while (i < timeline.size() && (!is_compute(timeline[i].action.kind) || timeline[i].end_s <= middle)) ++i;
    if (i < timeline.size() && timeline[i].start_s <= middle) running[k] = static_cast<int64_t>(i);
  }
  return running;
}

std::string seconds(double s) {
  std::ostringstream out;
  out << std::setprecision(4) << s << " s";
  return out.str();
}

}  // namespace

std::string render_schedule_grid(const PipelineSchedule& lowered, const SimulationResult& simulated, double column_s,
                                 int cell_width) {
  const PipelineShape& shape = lowered.shape;
  GIANT_CHECK(cell_width >= 2, "a grid cell needs at least 2 characters, got ", cell_width);
  GIANT_CHECK(static_cast<int>(simulated.timeline.size()) == shape.pp, "the simulation has ",
              simulated.timeline.size(), " ranks, the schedule ", shape.pp);
  if (column_s <= 0) column_s = shortest_compute_s(simulated);
  const double span = simulated.step_s / column_s;
  GIANT_CHECK(span <= kMaxColumns, "a grid of ", span, " columns of ", column_s, " s is too wide");
  const auto columns = static_cast<int64_t>(std::ceil(span - 1e-9));

  std::ostringstream out;
  out << "schedule " << schedule_name(shape.schedule) << (lowered.forward_only ? " forward-only" : "")
      << ", p=" << shape.pp << " v=" << shape.virtual_stages << " m=" << shape.micro_batches << ": step "
      << seconds(simulated.step_s) << ", bubble " << std::fixed << std::setprecision(1)
      << 100 * simulated.bubble_fraction << "%" << std::defaultfloat << ", one column = " << seconds(column_s)
      << "\n";
  if (simulated.deadlocked) out << simulated.deadlock << "\n";
  const int rank_digits = static_cast<int>(std::to_string(std::max(shape.pp - 1, 0)).size());
  for (int r = 0; r < shape.pp; ++r) {
    const std::vector<TimedAction>& timeline = simulated.timeline[r];
    const std::vector<int64_t> running = running_per_column(timeline, columns, column_s);
    out << "rank " << std::setw(rank_digits) << r << " |";
    for (int64_t k = 0; k < columns; ++k) {
      const int64_t now = running[k];
      if (now < 0) {
        out << std::string(static_cast<size_t>(cell_width), ' ');
        continue;
      }
      const bool first = k == 0 || running[k - 1] != now;
      const bool continues = k + 1 < columns && running[k + 1] == now;
      std::string cell = first ? describe(timeline[now].action).substr(0, static_cast<size_t>(cell_width - 1)) : "";
      cell.resize(static_cast<size_t>(cell_width - 1), first && !continues ? ' ' : '-');
      out << cell << (continues ? '-' : ' ');
    }
    out << "|\n";
  }
  return out.str();
}

}  // namespace giant::planner
