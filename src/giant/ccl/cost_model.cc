#include "giant/ccl/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

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

size_t link_segment_bytes(const CommConfig& config) {
  constexpr double kSegmentSeconds = 0.010;
  constexpr size_t kMin = 64 << 10;
  const double carried = config.tcp_gbps * 1e9 * kSegmentSeconds;
  return carried >= static_cast<double>(SIZE_MAX / 2) ? SIZE_MAX / 2 : std::max(kMin, static_cast<size_t>(carried));
}

int data_sockets_per_peer(const CommConfig& config) {
  constexpr double kOneStreamFillsGbytesPerS = 0.125;  // 1 Gbit/s
  if (config.sockets_per_peer > 0) return config.sockets_per_peer;
  return config.tcp_gbps < kOneStreamFillsGbytesPerS ? 1 : 2;
}

size_t ring_segment_bytes(const CommConfig& config, size_t call_segment_bytes, size_t block_bytes, int hops) {
  if (call_segment_bytes > 0) return call_segment_bytes;
  const size_t chosen =
      config.segment_bytes > 0 ? config.segment_bytes : pipeline_segment_bytes(config, block_bytes, hops);
  return std::min(chosen, link_segment_bytes(config));
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
