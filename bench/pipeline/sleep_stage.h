// A pipeline stage whose work is wall time alone: its forward sleeps, and
// its backward (a custom autograd function, so the executor's autograd
// backward runs it) sleeps too. It copies its input to its output and the
// output gradient to the input gradient, so a micro-batch's values reach the
// last stage unchanged, and holds one weight so its output needs a gradient
// whatever its input (stage 0's does not).
#pragma once

#include "giant/parallel/pipeline/executor.h"

namespace giant::bench::pipeline {

parallel::PipelineChunk sleep_stage(int stage, double forward_s, double backward_s);

}  // namespace giant::bench::pipeline
