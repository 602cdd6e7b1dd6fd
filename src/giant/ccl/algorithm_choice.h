// How ccl chooses a collective's algorithm when asked for `automatic`, and
// what the choice costs by the alpha-beta model: time = messages x latency
// (alpha) + bytes / bandwidth (beta), per link kind. The choice depends only
// on what every rank knows alike (the group's shape, the config, the size),
// so every rank picks the same algorithm; and it needs no Communicator, so
// the planner predicts a run's collectives with the rule ccl runs them by.
#pragma once

#include <cstddef>
#include <vector>

#include "giant/ccl/collectives.h"
#include "giant/ccl/config.h"

namespace giant::ccl {

// One link kind's cost.
struct LinkCost {
  double alpha_s = 0;      // seconds per message
  double bytes_per_s = 1;  // bandwidth achieved
};

// What of a group the choice depends on.
struct GroupShape {
  int ranks = 1;
  int hosts = 1;
  // Ranks on every host; 0 when hosts hold different numbers (the
  // hierarchical algorithms cannot run then).
  int ranks_per_host = 1;
  // The ranks of a host talk through shared memory (ccl.transport=auto).
  bool shared_memory = false;
};

// The link costs and size limits of a communicator's config.
struct CostModel {
  LinkCost tcp;  // between hosts, and inside one without shared memory
  LinkCost shm;  // through shared memory inside a host
  double halving_doubling_max_bytes = 0;
  double shm_chunk_bytes = 1;

  static CostModel from(const CommConfig& config);
};

struct AlgorithmCost {
  Algorithm algorithm;
  double seconds;
};

// The algorithms that can run an allreduce of `bytes` on the group, cheapest
// first: ring; halving-doubling up to halving_doubling_max_bytes; shm on one
// host with shared memory; hierarchical across hosts with shared memory and
// the same number of ranks on each.
std::vector<AlgorithmCost> allreduce_costs(const GroupShape& group, const CostModel& model, double bytes);

// What automatic allreduce runs: shm on one host with shared memory (it
// wins at every size), else the cheapest of allreduce_costs.
AlgorithmCost choose_allreduce(const GroupShape& group, const CostModel& model, double bytes);

// What automatic reduce-scatter or allgather of `total_bytes` (the whole
// buffer, every rank's block) runs: shm on one host with shared memory;
// across hosts, hierarchical where it can run and the buffer is large enough
// (64 KiB) for its bandwidth to matter more than its extra steps; else the
// ring. Either is half of the matching allreduce's work.
AlgorithmCost choose_reduce_scatter(const GroupShape& group, const CostModel& model, double total_bytes);
inline AlgorithmCost choose_allgather(const GroupShape& group, const CostModel& model, double total_bytes) {
  return choose_reduce_scatter(group, model, total_bytes);
}

}  // namespace giant::ccl
