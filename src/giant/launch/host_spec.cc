#include "giant/launch/host_spec.h"

#include <charconv>
#include <map>

#include "giant/base/error.h"

namespace giant::launch {
namespace {

constexpr const char* kForm = "expected a comma-separated list of HOST:SLOTS with HOST `local` or `netns:NAME`";

[[noreturn]] void bad(const std::string& what) { throw ConfigError("--hosts", what); }

int parse_slots(const std::string& entry, const std::string& text) {
  int slots = 0;
  const char* end = text.data() + text.size();
  auto [parsed_to, err] = std::from_chars(text.data(), end, slots);
  if (text.empty() || err != std::errc() || parsed_to != end || slots < 1) {
    bad("entry '" + entry + "': SLOTS must be a positive integer, got '" + text + "' (" + kForm + ")");
  }
  return slots;
}

// Names `ip netns` accepts: no path separators, not "." or "..".
bool valid_netns_name(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  for (char c : name) {
    if (c == '/' || c == '\0' || c == ',' || c == ':' || static_cast<unsigned char>(c) <= ' ') return false;
  }
  return true;
}

HostSlots parse_entry(const std::string& entry) {
  auto colon = entry.rfind(':');
  if (colon == std::string::npos) bad("entry '" + entry + "' has no ':SLOTS' (" + kForm + ")");
  HostSlots host;
  host.label = entry.substr(0, colon);
  host.slots = parse_slots(entry, entry.substr(colon + 1));
  if (host.label == "local") {
    host.kind = HostKind::local;
  } else if (host.label.rfind("netns:", 0) == 0) {
    host.kind = HostKind::netns;
    host.netns = host.label.substr(6);
    if (!valid_netns_name(host.netns)) {
      bad("entry '" + entry + "': '" + host.netns + "' is not a network namespace name");
    }
  } else if (!host.label.empty()) {
    bad("entry '" + entry + "': host '" + host.label +
        "' is not supported: giant launch runs ranks on this machine only (`local` or `netns:NAME`), "
        "remote hosts (ssh) are out of its scope; across machines use torchrun, srun or mpirun "
        "(docs/ccl.md, Bootstrap)");
  } else {
    bad("entry '" + entry + "' has no host (" + kForm + ")");
  }
  return host;
}

}  // namespace

std::vector<HostSlots> parse_host_spec(const std::string& spec) {
  if (spec.empty()) bad(std::string("is empty (") + kForm + ")");
  std::vector<HostSlots> hosts;
  size_t start = 0;
  while (true) {
    size_t comma = spec.find(',', start);
    std::string entry = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (entry.empty()) bad("'" + spec + "' has an empty entry (" + kForm + ")");
    hosts.push_back(parse_entry(entry));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

std::vector<RankPlacement> place_ranks(const std::vector<HostSlots>& hosts) {
  std::vector<RankPlacement> ranks;
  std::map<std::string, int> seen;  // label -> times seen so far
  for (size_t h = 0; h < hosts.size(); ++h) {
    int repeat = seen[hosts[h].label]++;
    std::string host_id = hosts[h].label + (repeat == 0 ? "" : "#" + std::to_string(repeat));
    for (int local = 0; local < hosts[h].slots; ++local) {
      RankPlacement placement;
      placement.rank = static_cast<int>(ranks.size());
      placement.local_rank = local;
      placement.local_world_size = hosts[h].slots;
      placement.host_index = static_cast<int>(h);
      placement.host_id = host_id;
      ranks.push_back(placement);
    }
  }
  return ranks;
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int total = 0;
  for (const HostSlots& host : hosts) total += host.slots;
  return total;
}

}  // namespace giant::launch
