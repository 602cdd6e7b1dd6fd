// The flags of `giant bench pipeline` (giant bench pipeline --help describes
// them) and the checks they get before any rank connects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "giant/layout/layout.h"
#include "giant/layout/schedule.h"

namespace CLI {
class App;
}

namespace giant::bench::pipeline {

struct Options {
  // Run in this order, each for --warmup then --steps steps.
  std::vector<Schedule> schedules{Schedule::gpipe, Schedule::one_f_one_b,
                                           Schedule::interleaved};
  int virtual_stages = 2;  // chunks per rank of the interleaved schedule (the others run 1)
  int64_t micro_batches = 8;
  // A rank's sleep per micro-batch, all its chunks together: each of V
  // chunks sleeps forward_s / V and backward_s / V.
  double forward_s = 0.020;
  double backward_s = 0.040;
  int64_t activation_bytes = 64 * 1024;  // each tensor between stages (fp32)
  int steps = 5;
  int warmup = 1;
};

// The flags as given, before options_from checks them.
struct OptionFlags {
  std::string schedule = "all";
  std::string virtual_stages;  // empty: not given (2 for interleaved)
  std::string micro_batches = "8";
  std::string forward_ms = "20", backward_ms = "40";
  std::string activation_bytes = "64KiB";
  std::string steps = "5", warmup = "1";
};

// Adds every flag of `giant bench pipeline` to app, bound to flags.
void add_options(CLI::App& app, OptionFlags& flags);

// The options the flags say; throws ConfigError naming the flag.
Options options_from(const OptionFlags& flags);

// The shape one schedule of the run has on `pp` ranks (interleaved: the
// options' virtual stages; the others: one chunk per rank).
PipelineShape shape_of(const Options& options, Schedule schedule, int pp);

// Checks the run against the launcher's world size, before any rank
// connects: at least two ranks, and every schedule's shape schedulable
// (check_pipeline_shape's rule, restated in the flags' terms). Throws
// ConfigError.
void check_world_size(const Options& options, int world_size);

}  // namespace giant::bench::pipeline
