#include "giant/ccl/cost_model.h"

#include <algorithm>
#include <cmath>

namespace giant::ccl::detail {

size_t pipeline_segment_bytes(const CommConfig& config, size_t block_bytes, int hops) {
  constexpr size_t kMin = 64 << 10, kMax = 4 << 20, kAlign = 4 << 10;
  const double alpha = config.tcp_alpha_us * 1e-6, beta = config.tcp_gbps * 1e9;
  const double block = static_cast<double>(block_bytes);
  const double k = std::sqrt(std::max(1, hops - 1) * block / (alpha * beta));
  size_t segment = k > 1 ? static_cast<size_t>(block / k) : block_bytes;
  segment = std::clamp(segment, kMin, kMax);
  return (segment + kAlign - 1) / kAlign * kAlign;
}

std::vector<std::vector<int>> ranks_by_host(const Communicator& comm) {
  const HostTopology& t = comm.topology();
  std::vector<std::vector<int>> hosts(t.num_hosts());
  for (int r = 0; r < comm.size(); ++r) hosts[t.host_of_rank[r]].push_back(r);
  return hosts;
}

std::vector<int> cross_host_ring(const Communicator& comm) {
  const HostTopology& t = comm.topology();
  if (!comm.shared_memory() && t.local_size > 1) return {};
  std::vector<int> ring;
  for (const auto& members : ranks_by_host(comm)) {
    if (static_cast<int>(members.size()) != t.local_size) return {};
    ring.push_back(members[t.local_rank]);
  }
  return ring;
}

GroupShape group_shape(const Communicator& comm) {
  GroupShape g;
  g.ranks = comm.size();
  g.hosts = comm.topology().num_hosts();
  g.shared_memory = comm.shared_memory();
  g.ranks_per_host = comm.topology().local_size;
  if (g.hosts == 1) return g;  // every call on one host asks: no allocation
  for (const auto& members : ranks_by_host(comm))
    if (static_cast<int>(members.size()) != g.ranks_per_host) g.ranks_per_host = 0;
  return g;
}

}  // namespace giant::ccl::detail
