// `giant bench ccl`: ccl's collectives, nccl-tests style (see ccl_bench.cc).
#pragma once

namespace giant::bench {

// argv[0] is the command's name; the flags follow. Returns the exit status.
int run_ccl_bench(int argc, char** argv);

}  // namespace giant::bench
