#include "giant/planner/comm_model.h"

#include <algorithm>

#include "giant/ccl/algorithm_choice.h"

namespace giant::planner {
namespace {

// The group as ccl's choice sees it: one rank per host, no shared memory.
ccl::GroupShape flat_group(const GroupLink& g) { return {g.size, g.size, 1, false}; }

// ccl's default limits, with the group's link as the one it uses.
ccl::CostModel link_model(const GroupLink& g) {
  ccl::CostModel model = ccl::CostModel::from(ccl::CommConfig{});
  model.tcp = {g.latency_s, g.bandwidth_bytes_per_s};
  return model;
}

// Encoding and decoding per element of a member's chunk (one encode and
// two decodes of the chunk, one encode of the sub-chunk, the padded
// copies), as bytes of elementwise traffic at the device's elementwise
// rate: 6 ns per element on a Zen 5 core that streams 19 GB/s (int8 encode
// 3.6 ns, decode 0.65 ns).
constexpr double kWireCodecBytesPerElement = 114;

// H and L of a data-parallel group that crosses hosts.
int hosts_of(const GroupLink& g) { return g.size / std::max(1, g.members_per_host); }

}  // namespace

GroupLink group_link(const ClusterSpec& c, const Layout& l, Axis axis) {
  GroupLink g;
  g.size = l.size_of(axis);
  const int stride = l.stride_of(axis);
  const int per_host = c.devices_per_host;
  g.members_per_host = stride >= per_host ? 1 : std::min(g.size, std::max(1, per_host / stride));
  g.crosses_hosts = g.members_per_host < g.size;
  if (!g.crosses_hosts) {
    g.transport = c.intra_host.transport;
    g.bandwidth_bytes_per_s = c.intra_host.effective_bandwidth();
    g.latency_s = c.intra_host.latency_s;
    return g;
  }
  const double sharing = std::max(1.0, double(per_host) / g.members_per_host);
  g.transport = c.inter_host.transport;
  g.bandwidth_bytes_per_s = c.inter_host.effective_bandwidth() / sharing;
  if (per_host > 1) g.bandwidth_bytes_per_s = std::min(g.bandwidth_bytes_per_s, c.intra_host.effective_bandwidth());
  g.latency_s = c.inter_host.latency_s;
  return g;
}

GroupLink single_ring_link(const ClusterSpec& c, const GroupLink& group) {
  GroupLink g = group;
  if (g.crosses_hosts)
    g.bandwidth_bytes_per_s =
        std::min(g.bandwidth_bytes_per_s, c.inter_host.effective_bandwidth() / std::max(1, c.devices_per_host));
  return g;
}

double allreduce_seconds(double bytes, const GroupLink& g) {
  if (g.size <= 1 || bytes <= 0) return 0;
  return ccl::choose_allreduce(flat_group(g), link_model(g), bytes).seconds;
}

double reduce_scatter_seconds(double bytes, const GroupLink& g) {
  if (g.size <= 1 || bytes <= 0) return 0;
  return ccl::choose_reduce_scatter(flat_group(g), link_model(g), bytes).seconds;
}

double allgather_seconds(double bytes, const GroupLink& g) { return reduce_scatter_seconds(bytes, g); }

namespace {

// ccl's hierarchical collectives run over shared-memory hosts.
bool runs_hierarchical(const ClusterSpec& c, const GroupLink& g) {
  return g.crosses_hosts && g.members_per_host > 1 && c.intra_host.transport == Transport::shm;
}

// The group as ccl sees it across such hosts: shared memory as the trainer
// gives ccl the cluster's links (with_cluster_links), TCP as the group's link.
ccl::CostModel hierarchical_model(const ClusterSpec& c, const GroupLink& g) {
  ccl::CostModel model = ccl::CostModel::from(with_cluster_links(ccl::CommConfig{}, c));
  model.tcp = link_model(g).tcp;
  return model;
}

ccl::GroupShape hierarchical_shape(const GroupLink& g) { return {g.size, hosts_of(g), g.members_per_host, true}; }

}  // namespace

double zero_movement_seconds(double bytes, const ClusterSpec& c, const GroupLink& g, bool ccl_runs_it) {
  if (!ccl_runs_it || !runs_hierarchical(c, g)) return reduce_scatter_seconds(bytes, single_ring_link(c, g));
  if (bytes <= 0) return 0;
  return ccl::choose_reduce_scatter(hierarchical_shape(g), hierarchical_model(c, g), bytes).seconds;
}

double ccl_allreduce_seconds(double bytes, const ClusterSpec& c, const GroupLink& g) {
  if (!runs_hierarchical(c, g)) return allreduce_seconds(bytes, g);
  if (bytes <= 0) return 0;
  return ccl::choose_allreduce(hierarchical_shape(g), hierarchical_model(c, g), bytes).seconds;
}

double compressed_allreduce_seconds(double bytes, const ClusterSpec& c, const GroupLink& g, ccl::GradWire wire) {
  if (wire == ccl::GradWire::none || !g.crosses_hosts) return allreduce_seconds(bytes, g);
  const int members = std::max(1, g.members_per_host);
  GroupLink inside;
  inside.size = members;
  inside.members_per_host = members;
  inside.transport = c.intra_host.transport;
  inside.bandwidth_bytes_per_s = c.intra_host.effective_bandwidth();
  inside.latency_s = c.intra_host.latency_s;
  GroupLink across = g;
  across.size = hosts_of(g);
  across.members_per_host = 1;
  across.bandwidth_bytes_per_s = c.inter_host.effective_bandwidth() / std::max(1, c.devices_per_host);
  const double chunk = bytes / members;
  return allreduce_seconds(bytes, inside) + allreduce_seconds(chunk / ccl::grad_wire_ratio(wire), across) +
         (chunk / 4) * kWireCodecBytesPerElement / c.device.elementwise_bandwidth();
}

double grad_wire_memory_bytes(double parameters, const ClusterSpec& c, const Layout& l) {
  if (l.grad_wire == ccl::GradWire::none || l.dp == 1 || l.zero == 3) return 0;
  const GroupLink g = group_link(c, l, Axis::dp);
  if (!g.crosses_hosts) return 0;
  if (ccl::low_rank_of(l.grad_wire) > 0) return 4 * parameters;  // a residual per gradient (the factors are small)
  const double chunk = parameters / std::max(1, g.members_per_host);
  return 4 * (chunk + chunk / hosts_of(g));
}

ccl::CommConfig with_cluster_links(ccl::CommConfig config, const ClusterSpec& cluster) {
  const ClusterSpec c = cluster.resolved();
  const bool across = c.hosts > 1;
  if (across || c.intra_host.transport == Transport::tcp) {
    config = with_tcp_link(config, across ? c.inter_host : c.intra_host);
  }
  if (c.intra_host.transport == Transport::shm) {
    config.shm_alpha_us = c.intra_host.latency_s * 1e6;
    config.shm_gbps = c.intra_host.effective_bandwidth() / 1e9;
  }
  return config;
}

ccl::CommConfig with_tcp_link(ccl::CommConfig config, const LinkSpec& link) {
  config.tcp_alpha_us = link.latency_s * 1e6;
  config.tcp_gbps = link.effective_bandwidth() / 1e9;
  return config;
}

double point_to_point_seconds(double bytes, const GroupLink& g) {
  if (g.size <= 1 || bytes <= 0) return 0;
  return g.latency_s + bytes / g.bandwidth_bytes_per_s;
}

}  // namespace giant::planner
