// `giant launch --emulate HxR --link-rate RATE`: a cluster of H hosts made of
// this machine's network namespaces, each host's link capped at RATE.
//
// Host h is the namespace giant-emu-PID-h (PID: the launcher's) with one veth
// to a bridge in giant-emu-PID-switch. What a host sends is capped on its own
// veth end, what it receives on its bridge port (tc tbf both: netem, which
// could add delay, is absent on these kernels), so each host's link is RATE
// in both directions, as a host's NIC is; small packets (acknowledgements)
// pass ahead of its queue. A last, uncapped bridge port leads
// to this namespace, where the launcher serves the store. Ranks of one host
// share it and so use shared memory between them, as on a real machine.
//
// Deleting the namespaces deletes every link, so nothing else is left to
// remove: the destructor does it, and a cluster whose launcher died (SIGKILL)
// is deleted by the next EmulatedCluster made on the machine.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "giant/launch/host_spec.h"

namespace giant::launch {

struct EmulatedClusterSpec {
  int hosts = 0;
  int ranks_per_host = 0;
  double link_bits_per_s = 0;  // 0: no cap
};

// "HxR" (e.g. "2x4"): H hosts of R ranks. Throws giant::ConfigError (key
// "--emulate") naming what is wrong.
EmulatedClusterSpec parse_emulate(const std::string& text);

// Why this process cannot make an emulated cluster (not root, no `ip` or
// `tc`); empty when it can.
std::string emulation_unavailable_reason(const std::string& path);

class EmulatedCluster {
 public:
  // Removes the clusters of dead launchers, then makes this one; progress
  // and what was made go to log. Throws giant::Error with the failing
  // command's output after removing what it made. `path` finds `ip` and `tc`.
  EmulatedCluster(const EmulatedClusterSpec& spec, const std::string& path, std::ostream& log);
  ~EmulatedCluster();
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  // One netns host per emulated host, in order, with its ranks.
  std::vector<HostSlots> hosts() const;
  // This namespace's address on the bridge: the store's, which every host reaches.
  const std::string& store_host() const { return store_host_; }

 private:
  void remove();

  EmulatedClusterSpec spec_;
  std::string path_;    // PATH for `ip`
  std::string prefix_;  // of every namespace this cluster made
  std::vector<std::string> names_;
  std::string switch_name_;
  std::string uplink_;  // the bridge's link to this namespace
  std::string store_host_;
};

}  // namespace giant::launch
