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

double point_to_point_seconds(double bytes, const GroupLink& g) {
  if (g.size <= 1 || bytes <= 0) return 0;
  return g.latency_s + bytes / g.bandwidth_bytes_per_s;
}

}  // namespace giant::planner
