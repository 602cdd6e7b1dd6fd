// Flags of `giant bench pipeline`.
#include "pipeline_bench_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "giant/base/error.h"
#include "giant/base/units.h"

namespace giant::bench::pipeline {
namespace {

constexpr const char* kFooter =
    "Run it under giant launch, one process per pipeline rank (the world size is pp, at least 2):\n"
    "  giant launch --nproc 4 -- giant bench pipeline --schedule 1f1b --micro-batches 8\n"
    "Each stage's forward sleeps and its backward (a custom autograd function) sleeps, so the\n"
    "executor's real path runs (receives posted ahead, sends, autograd backward, releases).\n"
    "--forward-ms and --backward-ms are a rank's time per micro-batch: with --virtual-stages V\n"
    "each of its V chunks sleeps F/V and B/V, so every schedule does the same work.\n"
    "--virtual-stages applies to the interleaved schedule only (default 2); gpipe and 1f1b\n"
    "run one chunk per rank.\n"
    "Rank 0 prints, per schedule, the measured step time (median over --steps) against\n"
    "simulate_schedule's for the same lowered schedule (costs: the sleeps, and the measured\n"
    "one-way time of one activation between two ranks), the bubble of each, and the peak\n"
    "in-flight activations per stage from the executor against the simulator's; then one\n"
    "`bench=pipeline ...` line per schedule.\n"
    "Exit status: 0 done, 1 a failed rank or a peak in flight that is not the simulator's, 2 bad\n"
    "flags, or a shape that cannot be scheduled.";

[[noreturn]] void bad_flag(const std::string& flag, const std::string& message) { throw ConfigError(flag, message); }

int64_t integer_flag(const std::string& flag, const std::string& text, int64_t min_value) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || *end != '\0' || errno == ERANGE || value < min_value ||
      value > 1000000000)
    bad_flag(flag, "expects an integer >= " + std::to_string(min_value) + ", got '" + text + "'");
  return value;
}

double milliseconds_flag(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' || !std::isfinite(value) || value < 0 || value > 600e3)
    bad_flag(flag, "expects milliseconds, a number from 0 to 600000, got '" + text + "'");
  return value * 1e-3;
}

std::vector<Schedule> schedules_flag(const std::string& text) {
  if (text == "all") return Options{}.schedules;
  std::vector<Schedule> schedules;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string name = text.substr(begin, comma - begin);
    try {
      schedules.push_back(parse_schedule(name));
    } catch (const ConfigError&) {
      bad_flag("--schedule", "expected all or a comma-separated list of gpipe, 1f1b and interleaved, got '" +
                                 text + "'");
    }
    begin = comma + 1;
  }
  return schedules;
}

// check_pipeline_shape names the training run's keys; the flag that sets each here.
std::string flag_of_key(const std::string& key) {
  if (key == "parallel.virtual_stages") return "--virtual-stages";
  if (key == "parallel.schedule") return "--schedule";
  if (key == "train.global_batch") return "--micro-batches";
  return "giant launch --nproc";  // parallel.pp: the ranks started
}

}  // namespace

void add_options(CLI::App& app, OptionFlags& f) {
  app.description("Pipeline schedules with sleeping stages: measured step time and peak in-flight "
                  "activations against the simulator's.");
  app.add_option("--schedule", f.schedule, "all, or a comma-separated list of gpipe, 1f1b, interleaved (default all)");
  app.add_option("--virtual-stages", f.virtual_stages, "chunks per rank of the interleaved schedule (default 2)");
  app.add_option("--micro-batches", f.micro_batches, "micro-batches per step (default 8)");
  app.add_option("--forward-ms", f.forward_ms, "a rank's forward sleep per micro-batch, ms (default 20)");
  app.add_option("--backward-ms", f.backward_ms, "a rank's backward sleep per micro-batch, ms (default 40)");
  app.add_option("--activation-bytes", f.activation_bytes,
                 "size of each fp32 tensor between stages, e.g. 64KiB (default 64KiB)");
  app.add_option("--steps", f.steps, "timed steps per schedule (default 5)");
  app.add_option("--warmup", f.warmup, "untimed steps per schedule before them (default 1)");
  app.footer(kFooter);
}

Options options_from(const OptionFlags& f) {
  Options o;
  o.schedules = schedules_flag(f.schedule);
  if (!f.virtual_stages.empty()) {
    o.virtual_stages = static_cast<int>(integer_flag("--virtual-stages", f.virtual_stages, 1));
    bool interleaved = false;
    for (Schedule s : o.schedules) interleaved |= s == Schedule::interleaved;
    if (!interleaved && o.virtual_stages > 1)
      bad_flag("--virtual-stages", "applies to the interleaved schedule only, but --schedule is '" + f.schedule + "'");
  }
  o.micro_batches = integer_flag("--micro-batches", f.micro_batches, 1);
  o.forward_s = milliseconds_flag("--forward-ms", f.forward_ms);
  o.backward_s = milliseconds_flag("--backward-ms", f.backward_ms);
  try {
    o.activation_bytes = parse_bytes(f.activation_bytes);
  } catch (const Error& e) {
    bad_flag("--activation-bytes", e.what());
  }
  if (o.activation_bytes < 4 || o.activation_bytes % 4 != 0 || o.activation_bytes > int64_t{1} << 30)
    bad_flag("--activation-bytes", "expects a whole number of fp32 elements (a multiple of 4 bytes) from 4 B to "
                                   "1 GiB, got '" + f.activation_bytes + "'");
  o.steps = static_cast<int>(integer_flag("--steps", f.steps, 1));
  o.warmup = static_cast<int>(integer_flag("--warmup", f.warmup, 0));
  return o;
}

PipelineShape shape_of(const Options& o, Schedule schedule, int pp) {
  PipelineShape shape;
  shape.schedule = schedule;
  shape.pp = pp;
  shape.virtual_stages = schedule == Schedule::interleaved ? o.virtual_stages : 1;
  shape.micro_batches = o.micro_batches;
  return shape;
}

void check_world_size(const Options& o, int world_size) {
  if (world_size < 2)
    bad_flag("giant launch --nproc", "giant bench pipeline needs at least 2 pipeline ranks, one process each; "
                                     "run it under giant launch --nproc P (got a world of " +
                                         std::to_string(world_size) + ")");
  for (Schedule schedule : o.schedules) {
    const PipelineShape shape = shape_of(o, schedule, world_size);
    try {
      check_pipeline_shape(shape);
    } catch (const ConfigError& e) {
      bad_flag(flag_of_key(e.key()), "--schedule " + std::string(schedule_name(schedule)) +
                                         " --virtual-stages " + std::to_string(shape.virtual_stages) +
                                         " --micro-batches " + std::to_string(shape.micro_batches) + " on " +
                                         std::to_string(world_size) + " ranks cannot be scheduled: " + e.what());
    }
  }
}

}  // namespace giant::bench::pipeline
