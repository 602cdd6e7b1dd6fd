#include "giant/ccl/algorithm_choice.h"

#include <algorithm>
#include <cmath>

namespace giant::ccl {
namespace {

// Ring allreduce over n ranks: 2(n-1) steps, each moving 1/n of the buffer.
double ring_allreduce_seconds(int n, double bytes, const LinkCost& link) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * link.alpha_s + 2.0 * (n - 1) / n * bytes / link.bytes_per_s;
}

// Rabenseifner: the ring's bandwidth term in 2 log2(n) steps.
double halving_doubling_seconds(int n, double bytes, const LinkCost& link) {
  const double steps = 2.0 * std::ceil(std::log2(static_cast<double>(n)));
  return steps * link.alpha_s + 2.0 * (n - 1) / n * bytes / link.bytes_per_s;
}

// Ring reduce-scatter or allgather of `bytes` in all: n-1 steps, each moving
// 1/n of the buffer.
double ring_movement_seconds(int n, double bytes, const LinkCost& link) {
  if (n <= 1) return 0;
  const double ranks = n;
  return (ranks - 1) * link.alpha_s + (ranks - 1) / ranks * bytes / link.bytes_per_s;
}

// The shm allreduce: one step (copy in, every rank folds all inputs) for
// small buffers; else per chunk three synchronisations, and per rank a copy
// in, a reduction of 1/n of the chunk from n slots and a copy out.
double shm_allreduce_seconds(int n, double bytes, const CostModel& m) {
  if (bytes <= 32768) return m.shm.alpha_s + (1.0 + n) * bytes / m.shm.bytes_per_s;
  const double chunks = std::ceil(bytes / m.shm_chunk_bytes);
  return 3.0 * chunks * m.shm.alpha_s + 3.0 * bytes / m.shm.bytes_per_s;
}

// Whether the hierarchical algorithms can run: several hosts with the same
// number of ranks each, sharing memory inside.
bool hierarchical_runs(const GroupShape& g) { return g.hosts > 1 && g.ranks_per_host > 0 && g.shared_memory; }

}  // namespace

CostModel CostModel::from(const CommConfig& c) {
  CostModel m;
  m.tcp = {c.tcp_alpha_us * 1e-6, c.tcp_gbps * 1e9};
  m.shm = {c.shm_alpha_us * 1e-6, c.shm_gbps * 1e9};
  m.halving_doubling_max_bytes = static_cast<double>(c.halving_doubling_max_bytes);
  m.shm_chunk_bytes = static_cast<double>(c.shm_chunk_bytes);
  return m;
}

std::vector<AlgorithmCost> allreduce_costs(const GroupShape& g, const CostModel& m, double bytes) {
  const int n = g.ranks;
  std::vector<AlgorithmCost> costs;
  costs.push_back({Algorithm::ring, ring_allreduce_seconds(n, bytes, m.tcp)});
  if (bytes <= m.halving_doubling_max_bytes)
    costs.push_back({Algorithm::halving_doubling, halving_doubling_seconds(n, bytes, m.tcp)});
  if (g.shared_memory && g.hosts == 1) costs.push_back({Algorithm::shm, shm_allreduce_seconds(n, bytes, m)});
  if (hierarchical_runs(g)) {
    // Reduce-scatter and allgather in shm, then the rings of all local ranks
    // share the host's link, together carrying what one ring of hosts would.
    const double inside = 2.0 * shm_allreduce_seconds(g.ranks_per_host, bytes / 2, m);
    costs.push_back({Algorithm::hierarchical, inside + ring_allreduce_seconds(g.hosts, bytes, m.tcp)});
  }
  std::stable_sort(costs.begin(), costs.end(),
                   [](const AlgorithmCost& a, const AlgorithmCost& b) { return a.seconds < b.seconds; });
  return costs;
}

AlgorithmCost choose_allreduce(const GroupShape& g, const CostModel& m, double bytes) {
  if (g.shared_memory && g.hosts == 1) return {Algorithm::shm, shm_allreduce_seconds(g.ranks, bytes, m)};
  return allreduce_costs(g, m, bytes).front();
}

AlgorithmCost choose_reduce_scatter(const GroupShape& g, const CostModel& m, double total_bytes) {
  // The shm part as half of an shm allreduce, as allreduce_costs counts it.
  if (g.shared_memory && g.hosts == 1) return {Algorithm::shm, shm_allreduce_seconds(g.ranks, total_bytes / 2, m)};
  if (hierarchical_runs(g) && g.ranks_per_host > 1 && total_bytes >= (64 << 10)) {
    const double inside = shm_allreduce_seconds(g.ranks_per_host, total_bytes / 2, m);
    return {Algorithm::hierarchical, inside + ring_movement_seconds(g.hosts, total_bytes, m.tcp)};
  }
  return {Algorithm::ring, ring_movement_seconds(g.ranks, total_bytes, m.tcp)};
}

}  // namespace giant::ccl
