// `giant launch --hosts SPEC`: which host each rank runs on.
//
// SPEC is a comma-separated list of HOST:SLOTS, HOST being `local` (this
// machine) or `netns:NAME` (a network namespace of this machine, entered with
// `ip netns exec NAME`). Ranks are numbered host by host, in list order.
// Remote hosts (ssh) are not supported.
#pragma once

#include <string>
#include <vector>

namespace giant::launch {

enum class HostKind { local, netns };

struct HostSlots {
  HostKind kind = HostKind::local;
  std::string netns;   // the namespace's name, for HostKind::netns
  int slots = 0;       // ranks on this host
  std::string label;   // as written: "local" or "netns:NAME"
};

// Throws giant::ConfigError (key "--hosts") naming the bad entry.
std::vector<HostSlots> parse_host_spec(const std::string& spec);

// Where one rank runs and what it is told about its host.
struct RankPlacement {
  int rank = 0;
  int local_rank = 0;
  int local_world_size = 1;
  int host_index = 0;   // index into the host list
  std::string host_id;  // GIANT_HOST_ID: distinct per host entry, same on a host
};

// One placement per rank, host by host. Host ids are the labels, with "#k"
// added to the k-th repeat of a label, so `local:2,local:2` acts as two hosts.
std::vector<RankPlacement> place_ranks(const std::vector<HostSlots>& hosts);

int total_slots(const std::vector<HostSlots>& hosts);

}  // namespace giant::launch
