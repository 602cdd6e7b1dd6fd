// What Algorithm::automatic needs of a communicator (internal): its shape
// for the choice in algorithm_choice.h, its host layout, and the pipeline
// segment of the ring and chain algorithms, by the same alpha-beta costs.
#pragma once

#include <cstddef>
#include <vector>

#include "giant/ccl/algorithm_choice.h"
#include "giant/ccl/collectives.h"

namespace giant::ccl::detail {

// The communicator as the algorithm choice sees it.
GroupShape group_shape(const Communicator& comm);

// The pipeline segment for moving blocks of block_bytes through `hops`
// successive TCP steps (a ring or chain): with k segments a block takes about
// (hops - 1 + k) (alpha + block / (k beta)), least at k = sqrt((hops - 1)
// block / (alpha beta)). Kept within [64 KiB, 4 MiB] and a multiple of 4 KiB.
size_t pipeline_segment_bytes(const CommConfig& config, size_t block_bytes, int hops);

// The longest segment worth sending over the TCP link of the cost model
// (ccl.model.tcp_gbps): what it carries in 10 ms, never under 64 KiB. On a
// slow link a long segment makes each step of a ring wait for the slowest
// of its TCP streams: at 5.7 Mbit/s over 4 emulated hosts a 1 MiB allreduce
// in 1 MiB segments reached 62-79% of the link, in 32-64 KiB ones 82-91%;
// at 300 Mbit/s the segment size did not matter.
size_t link_segment_bytes(const CommConfig& config);

// The data sockets per peer pair: ccl.tcp.sockets_per_peer, or when it is 0,
// two (on loopback one stream is bound by the core that copies it, and two
// moved 4 MiB 1.3-1.4x faster), but one on a TCP link of the cost model
// under 1 Gbit/s, which one stream fills: there a second only contends
// with the first in the link's queue (a chain of pipeline messages over 3
// emulated hosts at 18 Mbit/s took 1.2-1.4x longer on two).
int data_sockets_per_peer(const CommConfig& config);

// The pipeline segment of a ring or chain call: the call's own
// (call_segment_bytes, when not 0), else ccl.segment_bytes, else
// pipeline_segment_bytes; the last two no longer than link_segment_bytes.
size_t ring_segment_bytes(const CommConfig& config, size_t call_segment_bytes, size_t block_bytes, int hops);

// The communicator's ranks host by host (hosts in order of first rank,
// ranks in local rank order).
std::vector<std::vector<int>> ranks_by_host(const Communicator& comm);

// The ranks with this rank's local rank, one per host in host order: the
// cross-host ring of the hierarchical algorithms. Empty when hierarchical
// cannot run: hosts with different numbers of ranks, or several ranks on a
// host without shared memory.
std::vector<int> cross_host_ring(const Communicator& comm);

}  // namespace giant::ccl::detail
