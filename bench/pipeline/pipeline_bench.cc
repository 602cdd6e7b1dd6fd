// giant bench pipeline: the schedules' logic, timed, with stages that sleep.
//
// Every process is one pipeline rank of the world communicator (world size
// = pp). For each schedule it runs the trainer's pipeline executor on the
// lowered schedule, each stage a sleep_stage, for --warmup then --steps
// steps, each step between a barrier and a gather of what every rank saw.
// Sleeps are wall time that leaves the cores free, so on a machine with
// fewer cores than ranks the step is the schedule's own: the simulator,
// given the sleeps as costs, must say the same step time, and must say the
// same peak in-flight activations per stage as the executor counted.
//
// A step's time is from the first rank's start to the last rank's end, read
// on the ranks' common monotonic clock (giant launch starts every rank on
// this machine).
#include "pipeline_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/statistics.h"
#include "giant/base/timer.h"
#include "giant/base/tunables.h"
#include "giant/ccl/bootstrap.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/config.h"
#include "giant/parallel/pipeline/executor.h"
#include "giant/parallel/tensor_collectives.h"
#include "giant/planner/schedule_simulate.h"
#include "sleep_stage.h"

namespace giant::bench::pipeline {
namespace {

double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class T>
std::string join(const std::vector<T>& values) {
  std::string text;
  for (const T& value : values) text += (text.empty() ? "" : ",") + std::to_string(value);
  return text;
}

std::string join_seconds(const std::vector<double>& values) {
  std::string text;
  char buffer[32];
  for (double value : values) {
    std::snprintf(buffer, sizeof buffer, "%.4f", value);
    text += (text.empty() ? "" : ",") + std::string(buffer);
  }
  return text;
}

// The one-way time of one activation between ranks 0 and 1: half the
// median of 21 round trips, after 3 untimed. Every rank returns rank 0's.
double measure_transfer_s(ccl::Communicator& world, int64_t bytes) {
  constexpr int kWarmup = 3, kTimed = 21;
  constexpr uint32_t kTag = 1;  // nothing else is in flight: the pipeline runs after the barrier below
  std::vector<char> buffer(static_cast<size_t>(bytes));
  std::vector<double> round_trips;
  const int rank = world.rank();
  if (rank <= 1) {
    ccl::SendOptions send;
    send.buffer = buffer.data(), send.nbytes = buffer.size(), send.peer = 1 - rank, send.tag = kTag;
    ccl::RecvOptions recv;
    recv.buffer = buffer.data(), recv.nbytes = buffer.size(), recv.peer = 1 - rank, recv.tag = kTag;
    for (int i = 0; i < kWarmup + kTimed; ++i) {
      Stopwatch watch;
      if (rank == 0) {
        ccl::send(world, send).wait();
        ccl::recv(world, recv).wait();
      } else {
        ccl::recv(world, recv).wait();
        ccl::send(world, send).wait();
      }
      if (i >= kWarmup) round_trips.push_back(watch.seconds());
    }
  }
  at::Tensor one_way = torch::full({1}, rank == 0 ? median(round_trips) / 2 : 0.0, torch::kDouble);
  parallel::allreduce_(one_way, world, ccl::ReduceOp::max);
  return one_way.item<double>();
}

// What the ranks measured of one schedule, the same on every rank.
struct ScheduleReport {
  std::vector<double> step_s;           // per timed step: first rank's start to last rank's end
  std::vector<double> bubble;           // per timed step: 1 - compute / (p step)
  std::vector<double> wait_s;           // per rank: median over steps, blocked on receives and sends
  std::vector<int64_t> peak_in_flight;  // per stage: the most over steps, as the executor counted
  // Per rank, median over steps: the executor's time in one forward and in
  // one backward of one chunk (the sleep, and what the stage and autograd add).
  std::vector<double> forward_s, backward_s;
  // Per step, over every rank's compute actions (each one sleep): how much
  // later than asked a sleep ended, and the executor's compute time beyond
  // the sleeps (the copies, autograd, the loss).
  std::vector<double> sleep_overshoot_s, compute_overhead_s;
  bool losses_right = true;  // the last stage saw each micro-batch's own values
};

// A rank's step as it shares it: these fields, then the peak in flight of
// each of its chunks, all as doubles.
struct RankStep {
  double start_s, end_s, forward_s, backward_s, wait_s, loss_sum, slept_s, asked_s, sleeps;
};
constexpr int kRowFixed = sizeof(RankStep) / sizeof(double);
static_assert(sizeof(RankStep) == kRowFixed * sizeof(double), "RankStep is doubles only");

// Across steps, per rank: what add_step keeps to take medians of.
struct RankSeries {
  std::vector<double> wait_s, forward_s, backward_s;
};

void add_step(const at::Tensor& rows, const PipelineShape& shape, std::vector<RankSeries>& series,
              ScheduleReport& report) {
  const int p = shape.pp, v = shape.virtual_stages, width = kRowFixed + v;
  const double chunk_micro_batches = static_cast<double>(shape.micro_batches * v);
  double first = std::numeric_limits<double>::infinity(), last = -first, compute = 0, slept = 0, asked = 0;
  double sleeps = 0, loss_sum = 0;
  for (int r = 0; r < p; ++r) {
    const double* row = rows.data_ptr<double>() + r * width;
    RankStep rank_step;
    std::memcpy(&rank_step, row, sizeof rank_step);
    first = std::min(first, rank_step.start_s);
    last = std::max(last, rank_step.end_s);
    compute += rank_step.forward_s + rank_step.backward_s;
    slept += rank_step.slept_s, asked += rank_step.asked_s, sleeps += rank_step.sleeps;
    series[r].wait_s.push_back(rank_step.wait_s);
    series[r].forward_s.push_back(rank_step.forward_s / chunk_micro_batches);
    series[r].backward_s.push_back(rank_step.backward_s / chunk_micro_batches);
    if (r == p - 1) loss_sum = rank_step.loss_sum;  // the last stage is on the last rank
    for (int c = 0; c < v; ++c) {
      int64_t& peak = report.peak_in_flight[static_cast<size_t>(c * p + r)];
      peak = std::max(peak, static_cast<int64_t>(row[kRowFixed + c]));
    }
  }
  const double step = last - first;
  report.step_s.push_back(step);
  report.bubble.push_back(1 - compute / (p * step));
  report.sleep_overshoot_s.push_back(sleeps > 0 ? (slept - asked) / sleeps : 0);
  report.compute_overhead_s.push_back(sleeps > 0 ? (compute - slept) / sleeps : 0);
  // Micro-batch m carries the value m + 1 all the way, so the losses (their means) sum to m (m + 1) / 2.
  const double m = static_cast<double>(shape.micro_batches);
  report.losses_right = report.losses_right && std::abs(loss_sum - m * (m + 1) / 2) <= 1e-6 * m * m;
}

ScheduleReport run_schedule(ccl::Communicator& world, const Options& o, const PipelineSchedule& lowered) {
  const PipelineShape& shape = lowered.shape;
  const int p = shape.pp, v = shape.virtual_stages, rank = world.rank();
  auto tally = std::make_shared<SleepTally>();
  std::vector<parallel::PipelineChunk> chunks;
  for (int c = 0; c < v; ++c) {
    chunks.push_back(sleep_stage(c * p + rank, o.forward_s / v, o.backward_s / v, tally));
  }
  parallel::PipelineExecutor executor(world, std::move(chunks));
  const int64_t elements = o.activation_bytes / 4;
  parallel::PipelineStepFunctions functions;
  functions.input = [elements](int64_t m) { return torch::full({elements}, static_cast<double>(m + 1)); };
  functions.loss = [](int64_t, const at::Tensor& output) { return output.mean(); };

  ScheduleReport report;
  report.peak_in_flight.assign(static_cast<size_t>(shape.stages()), 0);
  std::vector<RankSeries> series(static_cast<size_t>(p));
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    ccl::barrier(world).wait();
    *tally = SleepTally{};
    const double start = monotonic_s();
    const parallel::PipelineStepResult result =
        executor.run(lowered, functions, {elements}, torch::TensorOptions().dtype(torch::kFloat));
    const RankStep mine{start,           monotonic_s(),   result.forward_s,
                        result.backward_s, result.wait_s, result.loss_sum,
                        tally->slept_s,  tally->asked_s,  static_cast<double>(tally->sleeps)};
    at::Tensor row = torch::empty({kRowFixed + v}, torch::kDouble);
    std::memcpy(row.data_ptr<double>(), &mine, sizeof mine);
    for (int c = 0; c < v; ++c) row.data_ptr<double>()[kRowFixed + c] = static_cast<double>(result.peak_in_flight[c]);
    const at::Tensor rows = parallel::allgather(row, world, 0);
    if (step >= o.warmup) add_step(rows, shape, series, report);
  }
  for (const RankSeries& rank : series) {
    report.wait_s.push_back(median(rank.wait_s));
    report.forward_s.push_back(median(rank.forward_s));
    report.backward_s.push_back(median(rank.backward_s));
  }
  return report;
}

// The same schedule simulated with what the executor measured of each
// compute action instead of the sleeps: what is left between it and the
// measured step is the schedule's logic (waits, posting order, transfers).
planner::SimulationResult simulate_measured_costs(const PipelineSchedule& lowered,
                                                  const ScheduleReport& measured, double transfer_s) {
  const PipelineShape& shape = lowered.shape;
  planner::ActionCosts costs = planner::ActionCosts::uniform(shape.stages(), 0, 0, transfer_s);
  for (int stage = 0; stage < shape.stages(); ++stage) {
    costs.forward_s[stage] = measured.forward_s[shape.rank_of_stage(stage)];
    costs.backward_s[stage] = measured.backward_s[shape.rank_of_stage(stage)];
  }
  return planner::simulate_schedule(lowered, costs, {/*timeline=*/false});
}

void print_preamble(const Options& o, const ccl::BootstrapInfo& info, double transfer_s) {
  std::string schedules;
  for (Schedule s : o.schedules) {
    schedules += (schedules.empty() ? "" : ",") + std::string(schedule_name(s));
  }
  std::printf("# giant bench pipeline p=%d schedules=%s virtual_stages=%d (interleaved) micro_batches=%lld "
              "forward_ms=%g backward_ms=%g activation_bytes=%lld steps=%d warmup=%d, %d ranks started by %s\n",
              info.world_size, schedules.c_str(), o.virtual_stages, static_cast<long long>(o.micro_batches),
              o.forward_s * 1e3, o.backward_s * 1e3, static_cast<long long>(o.activation_bytes), o.steps, o.warmup,
              info.world_size, info.source.c_str());
  std::printf("# each rank sleeps forward_ms + backward_ms per micro-batch: with V chunks, each chunk F/V and B/V\n");
  std::printf("# transfer: one activation between two ranks takes %.1f us one way (measured; the simulator's "
              "transfer_s)\n",
              transfer_s * 1e6);
  std::fflush(stdout);
}

void print_report(const Options& o, const PipelineSchedule& lowered, double transfer_s,
                  const ScheduleReport& measured, const planner::SimulationResult& simulated,
                  const planner::SimulationResult& with_measured_costs) {
  const PipelineShape& shape = lowered.shape;
  const char* name = schedule_name(shape.schedule);
  const double step = median(measured.step_s), bubble = median(measured.bubble);
  const double ratio = step / simulated.step_s, ratio_measured_costs = step / with_measured_costs.step_s;
  const double overshoot_us = median(measured.sleep_overshoot_s) * 1e6;
  const double overhead_us = median(measured.compute_overhead_s) * 1e6;
  const bool peaks_match = measured.peak_in_flight == simulated.peak_in_flight;
  const std::string peaks = join(measured.peak_in_flight), simulated_peaks = join(simulated.peak_in_flight);
  std::printf("# %s p=%d v=%d m=%lld: step %.4f s measured (median of %zu), %.4f s simulated, ratio %.4f; "
              "bubble %.4f measured, %.4f simulated; peak in flight per stage %s, simulated %s%s\n",
              name, shape.pp, shape.virtual_stages, static_cast<long long>(shape.micro_batches), step,
              measured.step_s.size(), simulated.step_s, ratio, bubble, simulated.bubble_fraction, peaks.c_str(),
              simulated_peaks.c_str(), peaks_match ? "" : " (MISMATCH)");
  std::printf("#   measured steps %s s; wait per rank %s s; per compute action a sleep ends %.0f us late and the "
              "executor's compute takes %.0f us beyond it; simulated with the executor's measured compute times "
              "%.4f s, ratio %.4f\n",
              join_seconds(measured.step_s).c_str(), join_seconds(measured.wait_s).c_str(), overshoot_us,
              overhead_us, with_measured_costs.step_s, ratio_measured_costs);
  if (!measured.losses_right)
    std::printf("# FAILED: the last stage's losses were not those of its micro-batches (an activation went astray)\n");
  std::printf("bench=pipeline schedule=%s p=%d v=%d m=%lld forward_ms=%g backward_ms=%g activation_bytes=%lld "
              "steps=%zu transfer_s=%.3g measured_step_s=%.6f simulated_step_s=%.6f ratio=%.4f measured_bubble=%.4f "
              "simulated_bubble=%.4f sleep_overshoot_us=%.0f compute_overhead_us=%.0f "
              "simulated_measured_costs_step_s=%.6f ratio_measured_costs=%.4f peak_in_flight=%s "
              "simulated_peak_in_flight=%s peaks_match=%s losses_right=%s\n",
              name, shape.pp, shape.virtual_stages, static_cast<long long>(shape.micro_batches), o.forward_s * 1e3,
              o.backward_s * 1e3, static_cast<long long>(o.activation_bytes), measured.step_s.size(), transfer_s,
              step, simulated.step_s, ratio, bubble, simulated.bubble_fraction, overshoot_us, overhead_us,
              with_measured_costs.step_s, ratio_measured_costs, peaks.c_str(), simulated_peaks.c_str(),
              peaks_match ? "yes" : "no", measured.losses_right ? "yes" : "no");
  std::fflush(stdout);
}

// The whole benchmark, as run_pipeline_bench describes it.
int run_benchmark(const Options& o) {
  const ccl::Environment env = ccl::Environment::from_process();
  const ccl::BootstrapInfo info = ccl::resolve_bootstrap(env);
  check_world_size(o, info.world_size);
  Tunables tunables;
  ccl::CommConfig::define_tunables(tunables);
  // A benchmark should fail fast rather than wait out the library's default.
  tunables.set("ccl.timeout", "60s", TunableSource::config);
  tunables.apply_environment(env.vars());
  std::vector<PipelineSchedule> schedules;
  for (Schedule s : o.schedules) {
    schedules.push_back(lower_communication(generate_schedule(shape_of(o, s, info.world_size))));
    validate_schedule(schedules.back());
  }

  ccl::Bootstrap boot = ccl::bootstrap_from_environment(env, tunables);
  ccl::Communicator& world = *boot.world;
  const bool leader = world.rank() == 0;
  const double transfer_s = measure_transfer_s(world, o.activation_bytes);
  if (leader) print_preamble(o, info, transfer_s);
  bool ok = true;
  for (const PipelineSchedule& lowered : schedules) {
    const ScheduleReport measured = run_schedule(world, o, lowered);
    const planner::ActionCosts costs =
        planner::ActionCosts::uniform(lowered.shape.stages(), o.forward_s / lowered.shape.virtual_stages,
                                      o.backward_s / lowered.shape.virtual_stages, transfer_s);
    const planner::SimulationResult simulated = planner::simulate_schedule(lowered, costs, {/*timeline=*/false});
    GIANT_CHECK(!simulated.deadlocked, "the simulator found the schedule deadlocked: ", simulated.deadlock);
    // Every rank comes to the same verdict from the same gathered rows, so each exits alike.
    ok = ok && measured.peak_in_flight == simulated.peak_in_flight && measured.losses_right;
    if (leader) {
      print_report(o, lowered, transfer_s, measured, simulated,
                   simulate_measured_costs(lowered, measured, transfer_s));
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

int run_pipeline_bench(const Options& o) {
  try {
    return run_benchmark(o);
  } catch (const c10::Error& e) {
    throw Error(e.what_without_backtrace());  // the message without torch's backtrace
  }
}

}  // namespace giant::bench::pipeline
