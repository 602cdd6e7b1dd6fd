// Communication time by the alpha-beta cost of the algorithm ccl runs: time
// = steps x latency + bytes on the busiest link / its achieved bandwidth.
// The choice of algorithm and its cost are ccl's own (ccl/algorithm_choice.h).
#pragma once

#include "giant/ccl/config.h"
#include "giant/planner/cluster_spec.h"
#include "giant/layout/layout.h"

namespace giant::planner {

// The link the members of one axis group talk over, given the placement.
struct GroupLink {
  int size = 1;
  int members_per_host = 1;
  bool crosses_hosts = false;
  Transport transport = Transport::nvlink;
  double bandwidth_bytes_per_s = 0;  // per rank and direction, shared as it is at run time
  double latency_s = 0;
};

// Members of the axis on one host follow from its stride (Layout::stride_of).
// A group wholly inside a host gets the intra-host link. A ring that spans
// hosts crosses each host boundary once per direction, and every group of
// that axis on the host does so at once, so each gets the host's NIC
// bandwidth divided by devices_per_host / members_per_host.
GroupLink group_link(const ClusterSpec& cluster, const Layout& layout, Axis axis);

// The link one flat ring over the group gets when its traffic cannot be
// spread over the host's network links: a ring crosses each host boundary
// on one device's path, which on the published clusters (one NIC per GPU)
// is one device's share of the host's bandwidth, however many of the
// host's devices the group holds. ZeRO-3's per-layer gathers and
// reduce-scatters run at this rate (the published ZeRO-3 runs of
// Narayanan et al. 2021, table 2, fall as it predicts); bucketed
// allreduces keep group_link's, spread over every NIC.
GroupLink single_ring_link(const ClusterSpec& cluster, const GroupLink& group);

// What ccl's automatic algorithm takes on a group whose ranks each talk over
// the group's one link, with no shared memory between them: an allreduce
// weighs halving-doubling (2 log2 n steps, up to ccl's
// ccl.allreduce.halving_doubling_max_bytes) against the ring (2 (n-1)
// steps), both moving 2 (n-1)/n x bytes per rank; a reduce-scatter or
// allgather of `bytes` in total is the ring's (n-1) steps, (n-1)/n x bytes.
double allreduce_seconds(double bytes, const GroupLink& link);
double reduce_scatter_seconds(double bytes, const GroupLink& link);
double allgather_seconds(double bytes, const GroupLink& link);
// A reduce-scatter or allgather of `bytes` in total by ZeRO over the
// data-parallel `group`. Where ccl runs it (`ccl_runs_it`) across hosts
// whose ranks share memory, it is hierarchical (ccl::choose_reduce_scatter):
// half an shm allreduce inside each host, then one ring of hosts per local
// rank, the rings together carrying (H-1)/H x bytes over the group's share
// of the host link. Elsewhere (one host, NVLink hosts, DeepSpeed's NCCL)
// the flat ring at single_ring_link's rate.
double zero_movement_seconds(double bytes, const ClusterSpec& cluster, const GroupLink& group, bool ccl_runs_it);
// An allreduce of `bytes` as ccl runs it over `group`: hierarchical across
// hosts whose ranks share memory (ccl::choose_allreduce), else as
// allreduce_seconds.
double ccl_allreduce_seconds(double bytes, const ClusterSpec& cluster, const GroupLink& group);

// `config` with the cluster's links as ccl's cost model (ccl.model.*): TCP
// at the inter-host link's achieved rate and latency across hosts (inside
// one host without shared memory, the intra-host link's), shared memory at
// the intra-host link's where the hosts have it. ccl then chooses each
// collective's algorithm on the links the planner costs it on: with its
// defaults (a 10 Gbit/s-class link) a flat ring across 2 hosts of 2 ranks
// wins from 1 MiB up, on a 10 Mbit/s link the hierarchical allreduce, which
// sends 2/3 of the ring's bytes between hosts.
ccl::CommConfig with_cluster_links(ccl::CommConfig config, const ClusterSpec& cluster);

// `config` with `link` as ccl's TCP cost model (what with_cluster_links
// gives the TCP link it picks).
ccl::CommConfig with_tcp_link(ccl::CommConfig config, const LinkSpec& link);

// One message between two ranks.
double point_to_point_seconds(double bytes, const GroupLink& link);

// The data-parallel gradient allreduce through a compressed wire (ccl's
// HostCompressedAllreduce) of `bytes` of f32 gradients over `group`, an
// axis group that crosses hosts with L members on each of its H hosts: an
// f32 allreduce inside each host, and each member's chunk (bytes / L)
// across the hosts as an alltoall and an allgather in the wire format (the
// bytes of a ring allreduce, grad_wire_ratio fewer), every device of a host
// sending at once over its share of the NIC; plus encoding and decoding.
// A group inside a host, or GradWire::none, costs allreduce_seconds.
double compressed_allreduce_seconds(double bytes, const ClusterSpec& cluster, const GroupLink& group,
                                    ccl::GradWire wire);
// The f32 error feedback the wire keeps per device for `parameters`
// elements (an elementwise codec: its chunk and sub-chunk of every bucket;
// a low-rank wire: a residual per element); 0 where it is a no-op.
double grad_wire_memory_bytes(double parameters, const ClusterSpec& cluster, const Layout& layout);

}  // namespace giant::planner
