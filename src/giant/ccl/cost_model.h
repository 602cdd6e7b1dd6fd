// The alpha-beta cost model behind Algorithm::automatic (internal): an
// estimate of each algorithm's time for a buffer on a communicator, from the
// latency (alpha) and bandwidth (beta) of each link kind in CommConfig. It
// depends only on what every rank knows alike (topology, config, size), so
// every rank picks the same algorithm.
#pragma once

#include <cstddef>
#include <vector>

#include "giant/ccl/collectives.h"

namespace giant::ccl::detail {

struct AlgorithmCost {
  Algorithm algorithm;
  double seconds;
};

// The algorithms that can run an allreduce of nbytes on comm, cheapest first.
std::vector<AlgorithmCost> allreduce_costs(const Communicator& comm, size_t nbytes);

// The pipeline segment for moving blocks of block_bytes through `hops`
// successive TCP steps (a ring or chain): with k segments a block takes about
// (hops - 1 + k) (alpha + block / (k beta)), least at k = sqrt((hops - 1)
// block / (alpha beta)). Kept within [64 KiB, 4 MiB] and a multiple of 4 KiB.
size_t pipeline_segment_bytes(const CommConfig& config, size_t block_bytes, int hops);

// The communicator's ranks host by host (hosts in order of first rank,
// ranks in local rank order).
std::vector<std::vector<int>> ranks_by_host(const Communicator& comm);

// The ranks with this rank's local rank, one per host in host order: the
// cross-host ring of the hierarchical algorithms. Empty when hierarchical
// cannot run: hosts with different numbers of ranks, or several ranks on a
// host without shared memory.
std::vector<int> cross_host_ring(const Communicator& comm);

}  // namespace giant::ccl::detail
