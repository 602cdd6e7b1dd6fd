// `giant bench ccl`: ccl's collectives, nccl-tests style (see ccl_bench.cc).
#pragma once

#include "ccl_bench_options.h"

namespace giant::bench {

// Runs the benchmark the options describe. Returns 0 when every result is
// correct, 1 when one is wrong or a rank failed; throws ConfigError for bad
// input found only now (the environment, a --set name) and other exceptions
// for failures before any rank ran.
int run_ccl_bench(const Options& options);

}  // namespace giant::bench
