// `giant bench pipeline`: the pipeline executor running GPipe, 1F1B and
// interleaved 1F1B with stages that sleep, against the schedule simulator
// (see pipeline_bench.cc).
#pragma once

#include "pipeline_bench_options.h"

namespace giant::bench::pipeline {

// Runs the benchmark as one rank of a launcher's world (giant launch
// --nproc P: P pipeline ranks). Returns 0 when every schedule ran and its
// peak in-flight activations and losses are as they must be, 1 otherwise;
// throws ConfigError for bad input found before any rank connects (the
// environment, a shape the world size cannot schedule) and other
// exceptions for failures (torch's as giant::Error, without its backtrace).
int run_pipeline_bench(const Options& options);

}  // namespace giant::bench::pipeline
