// A pipeline stage whose work is wall time alone: its forward sleeps, and
// its backward (a custom autograd function, so the executor's autograd
// backward runs it) sleeps too. It copies its input to its output and the
// output gradient to the input gradient, so a micro-batch's values reach the
// last stage unchanged, and holds one weight so its output needs a gradient
// whatever its input (stage 0's does not).
#pragma once

#include <cstdint>
#include <memory>

#include "giant/parallel/pipeline/executor.h"

namespace giant::bench::pipeline {

// What a rank's stages slept, as the clock saw it: a sleep ends some time
// after it asked to (timer slack, the wake-up), which the bench tells apart
// from the executor's own time.
struct SleepTally {
  double asked_s = 0;
  double slept_s = 0;
  int64_t sleeps = 0;
};

// The tally must outlive every backward of the chunk's forwards.
parallel::PipelineChunk sleep_stage(int stage, double forward_s, double backward_s,
                                    std::shared_ptr<SleepTally> tally);

}  // namespace giant::bench::pipeline
