#include "giant/launch/emulated_cluster.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <ostream>

#include "giant/base/error.h"
#include "giant/base/shell.h"
#include "giant/base/units.h"
#include "giant/launch/rank_process.h"

namespace giant::launch {
namespace {

constexpr const char* kPrefix = "giant-emu-";
constexpr int kMaxHosts = 64;
constexpr int kMaxRanksPerHost = 256;
// Clusters made at once (two launches, ctest -j) each take a 10.79.N.0/24
// no interface here has, choosing and taking it under this lock.
constexpr const char* kSubnetLock = "/run/giant-emulate.lock";

// Runs a /bin/sh script with `ip` and `tc` on its PATH.
ShellResult shell(const std::string& path, const std::string& script) {
  return run_shell("PATH='" + path + ":" + kSbinPath + "'; export PATH; " + script);
}

// Namespaces and uplinks of clusters whose launcher no longer runs
// ("giant-emu-PID-...", "gemuPID"). Uplinks are deleted here, not left to the
// kernel's later cleanup of their namespace, so they are gone on return.
void remove_stale_clusters(const std::string& path) {
  const std::string prefix = kPrefix;
  shell(path, "for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^" + prefix +
                  "'); do p=${n#" + prefix + "}; p=${p%%-*}; kill -0 \"$p\" 2>/dev/null || ip netns del \"$n\"; done; "
                  "for l in $(ls /sys/class/net | grep '^gemu[0-9]*$'); do "
                  "kill -0 \"${l#gemu}\" 2>/dev/null || ip link del \"$l\" 2>/dev/null; done; true");
}

int parse_count(const std::string& text, const std::string& what, int most) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [parsed_to, err] = std::from_chars(text.data(), end, value);
  if (text.empty() || err != std::errc() || parsed_to != end || value < 1 || value > most) {
    throw ConfigError("--emulate", what + " must be a whole number from 1 to " + std::to_string(most) + ", got '" +
                                       text + "'");
  }
  return value;
}

// tc's token bucket for one link end. Its bucket is what the link passes
// at once after an idle spell: at high rates 5 ms of traffic, so the
// kernel's timer keeps up, and never under 16 KiB; a bucket of a fixed
// size would let a slow link carry whole messages at once and look faster
// than its rate. The queue holds 50 ms of traffic and never under 256 KiB,
// as a switch port's buffer: a shallower one drops the bursts of several
// streams at once and TCP's recoveries leave the link idle.
long long token_bucket_bytes(double bits_per_s) {
  return static_cast<long long>(std::max(16.0 * 1024, bits_per_s / 8 * 0.005));
}

// The tc commands that cap one link end (`tc -n NS ... dev DEV`): a token
// bucket at the rate, and under it two queues, small packets (TCP's
// acknowledgements) first. A host's own network stack (fq_codel, Linux's
// usual default) does not queue the acknowledgements of what it receives
// behind what it sends; in one FIFO they wait behind the bucket's whole
// queue, up to the queue's time, and a host that sends and receives at
// once (a ring, a pipeline's middle stage) starves the flow it receives.
std::string link_cap_commands(const std::string& ns, const std::string& dev, double bits_per_s) {
  const auto queue_bytes = static_cast<long long>(std::max(256.0 * 1024, bits_per_s / 8 * 0.05));
  const std::string tc = "tc -n " + ns + " ";
  const std::string on = " dev " + dev + " ";
  // The priority classes' own rates are far above the bucket's: only it caps.
  const std::string unlimited = " htb rate " + std::to_string(std::llround(bits_per_s * 10)) + "bit";
  return tc + "qdisc add" + on + "root handle 1: tbf rate " + std::to_string(std::llround(bits_per_s)) +
         "bit burst " + std::to_string(token_bucket_bytes(bits_per_s)) + "b limit " + std::to_string(queue_bytes) +
         "b; " + tc + "qdisc add" + on + "parent 1:1 handle 10: htb default 2; " + tc + "class add" + on +
         "parent 10: classid 10:1" + unlimited + " prio 0; " + tc + "class add" + on + "parent 10: classid 10:2" +
         unlimited + " prio 1; " + tc + "qdisc add" + on + "parent 10:2 bfifo limit " + std::to_string(queue_bytes) +
         "; " + tc + "filter add" + on + "parent 10: protocol ip prio 1 u32 match u16 0 0xff80 at 2 flowid 10:1";
}

// The largest segment TCP may hand a capped veth (64 KiB by default): half
// the bucket, as a segment larger than the bucket stalls.
long long segment_bytes(double bits_per_s) { return std::min(64LL * 1024, token_bucket_bytes(bits_per_s) / 2); }

}  // namespace

EmulatedClusterSpec parse_emulate(const std::string& text) {
  const auto x = text.find_first_of("xX");
  if (x == std::string::npos) {
    throw ConfigError("--emulate", "expected HOSTSxRANKS (e.g. 2x4: 2 hosts of 4 ranks), got '" + text + "'");
  }
  EmulatedClusterSpec spec;
  spec.hosts = parse_count(text.substr(0, x), "the number of hosts", kMaxHosts);
  spec.ranks_per_host = parse_count(text.substr(x + 1), "the number of ranks per host", kMaxRanksPerHost);
  return spec;
}

std::string emulation_unavailable_reason(const std::string& path) {
  if (::geteuid() != 0) {
    return "--emulate needs root to create network namespaces (running as uid " + std::to_string(::geteuid()) +
           "): run it as root, or give --hosts with namespaces made beforehand";
  }
  const std::string search = path + ":" + kSbinPath;
  if (find_executable("ip", search).empty()) return "--emulate needs iproute2's `ip`, which is not installed";
  if (find_executable("tc", search).empty()) return "--emulate needs iproute2's `tc`, which is not installed";
  if (find_executable("flock", search).empty()) return "--emulate needs util-linux's `flock`, which is not installed";
  return "";
}

EmulatedCluster::EmulatedCluster(const EmulatedClusterSpec& spec, const std::string& path, std::ostream& log)
    : spec_(spec), path_(path) {
  GIANT_CHECK(spec.hosts >= 1 && spec.hosts <= kMaxHosts && spec.ranks_per_host >= 1, "an emulated cluster of ", spec.hosts,
              "x", spec.ranks_per_host);
  remove_stale_clusters(path);
  prefix_ = kPrefix + std::to_string(::getpid()) + "-";
  switch_name_ = prefix_ + "switch";
  for (int h = 0; h < spec.hosts; ++h) names_.push_back(prefix_ + std::to_string(h));
  uplink_ = "gemu" + std::to_string(::getpid());  // this namespace's end: at most 15 characters
  const std::string segment = std::to_string(segment_bytes(spec.link_bits_per_s));

  std::string script = "set -e; exec 9>" + std::string(kSubnetLock) + "; flock 9; n=1; " +
                       "while ip -4 -o addr show | grep -q \" 10\\.79\\.$n\\.\"; do n=$((n+1)); [ $n -lt 255 ]; done; "
                       "echo subnet=$n";
  auto add = [&script](const std::string& line) { script += "; " + line; };
  add("ip netns add " + switch_name_);
  add("ip -n " + switch_name_ + " link add br0 type bridge");
  add("ip -n " + switch_name_ + " link set br0 up");
  for (int h = 0; h < spec.hosts; ++h) {
    const std::string& host = names_[h];
    const std::string port = "port" + std::to_string(h);
    add("ip netns add " + host);
    add("ip -n " + host + " link set lo up");
    add("ip link add veth0 netns " + host + " type veth peer name " + port + " netns " + switch_name_);
    add("ip -n " + switch_name_ + " link set " + port + " master br0");
    add("ip -n " + switch_name_ + " link set " + port + " up");
    add("ip -n " + host + " addr add 10.79.$n." + std::to_string(h + 1) + "/24 dev veth0");
    add("ip -n " + host + " link set veth0 up");
    if (spec.link_bits_per_s > 0) {
      add("ip -n " + host + " link set dev veth0 gso_max_size " + segment);
      add(link_cap_commands(host, "veth0", spec.link_bits_per_s));        // what the host sends
      add(link_cap_commands(switch_name_, port, spec.link_bits_per_s));  // what it receives
    }
  }
  add("ip link add " + uplink_ + " type veth peer name uplink netns " + switch_name_);
  add("ip -n " + switch_name_ + " link set uplink master br0");
  add("ip -n " + switch_name_ + " link set uplink up");
  add("ip addr add 10.79.$n.254/24 dev " + uplink_);
  add("ip link set " + uplink_ + " up");
  const ShellResult made = shell(path, script);
  const auto at = made.output.find("subnet=");
  if (made.status != 0 || at == std::string::npos) {
    remove();
    throw Error("could not make the emulated cluster: `" + script + "` failed: " + made.output);
  }
  store_host_ = "10.79." + std::to_string(std::atoi(made.output.c_str() + at + 7)) + ".254";
  log << "giant launch: emulating " << spec.hosts << " host" << (spec.hosts == 1 ? "" : "s") << " of "
      << spec.ranks_per_host << " rank" << (spec.ranks_per_host == 1 ? "" : "s") << " (namespaces " << prefix_ << "0"
      << (spec.hosts > 1 ? ".." + std::to_string(spec.hosts - 1) : "") << "), each host's link "
      << (spec.link_bits_per_s <= 0 ? "uncapped" : "capped at " + format_bit_rate(spec.link_bits_per_s) + " each way") << "\n"
      << std::flush;
}

EmulatedCluster::~EmulatedCluster() { remove(); }

void EmulatedCluster::remove() {
  // Deleting a namespace deletes its end of each veth pair, and so the pair,
  // but the kernel does that later: the uplink in this namespace is deleted
  // first so that it is gone when the launch ends.
  std::string script = "ip link del " + uplink_ + " 2>/dev/null";
  for (const auto& name : names_) script += "; ip netns del " + name + " 2>/dev/null";
  script += "; ip netns del " + switch_name_ + " 2>/dev/null; true";
  shell(path_, script);
}

std::vector<HostSlots> EmulatedCluster::hosts() const {
  std::vector<HostSlots> hosts;
  for (const std::string& name : names_) {
    HostSlots host;
    host.kind = HostKind::netns;
    host.netns = name;
    host.slots = spec_.ranks_per_host;
    host.label = "netns:" + name;
    hosts.push_back(host);
  }
  return hosts;
}

}  // namespace giant::launch
