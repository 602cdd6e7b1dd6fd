#include "ccl/support/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <sys/wait.h>

#include "giant/base/shell.h"

namespace giant::ccl::test {
namespace {

constexpr const char* kPrefix = "giant-ccl-netns-";

// Namespaces named by a test process that no longer runs: "giant-ccl-netns-PID-...".
void delete_stale_namespaces() {
  run_shell(std::string("for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^") + kPrefix +
        "'); do p=${n#" + kPrefix + "}; p=${p%%-*}; kill -0 \"$p\" 2>/dev/null || ip netns del \"$n\"; done");
}

std::string process_prefix() { return kPrefix + std::to_string(::getpid()) + "-"; }

// Whether this machine lets us make a namespace: worked out once per process.
std::string probe_namespaces() {
  if (::geteuid() != 0) {
    return "needs root to create network namespaces (running as uid " + std::to_string(::geteuid()) +
           "); CI runs these tests as root";
  }
  if (run_shell("command -v ip").status != 0) return "needs iproute2's `ip` to create network namespaces";
  delete_stale_namespaces();
  const std::string probe = process_prefix() + "probe";
  ShellResult made = run_shell("ip netns add " + probe + " && ip -n " + probe + " link set lo up");
  run_shell("ip netns del " + probe);
  if (made.status != 0) return "cannot create a network namespace here (`ip netns add` failed: " + made.output + ")";
  return "";
}

}  // namespace

std::string NamespaceHosts::unavailable_reason() {
  static const std::string reason = probe_namespaces();
  return reason;
}

NamespaceHosts::NamespaceHosts(NamespaceHostsOptions options) : options_(std::move(options)) {
  const int hosts = options_.hosts;
  if (hosts < 1 || hosts > 26) throw std::runtime_error("NamespaceHosts: 1 to 26 hosts, got " + std::to_string(hosts));
  const bool capped = !options_.rate.empty() || std::any_of(options_.host_rates.begin(), options_.host_rates.end(),
                                                             [](const std::string& r) { return !r.empty(); });
  if (capped && run_shell("command -v tc").status != 0) {
    throw std::runtime_error("NamespaceHosts: a rate cap needs iproute2's `tc`");
  }
  // Unique among the objects of this process (two may live at once) and,
  // through the pid, among processes.
  static std::atomic<int> sequence{0};
  prefix_ = process_prefix() + std::to_string(sequence.fetch_add(1)) + "-";
  delete_stale_namespaces();
  for (int h = 0; h < hosts; ++h) {
    names_.push_back(prefix_ + std::to_string(h));
    addresses_.push_back("10.201.0." + std::to_string(h + 1));
  }
  auto tbf_of = [this](const std::string& rate) {
    return rate.empty() ? std::string()
                        : " root tbf rate " + rate + " burst " + options_.burst + " latency " + options_.latency;
  };
  const std::string tbf = tbf_of(options_.rate);
  // What host h sends leaves through its own veth end.
  auto host_tbf = [&](int h) {
    bool own = h < static_cast<int>(options_.host_rates.size()) && !options_.host_rates[h].empty();
    return own ? tbf_of(options_.host_rates[h]) : tbf;
  };
  std::string script = "set -e";
  auto add = [&script](const std::string& line) { script += "; " + line; };
  for (int h = 0; h < hosts; ++h) {
    add("ip netns add " + names_[h]);
    add("ip -n " + names_[h] + " link set lo up");
  }
  if (hosts == 2) {
    add("ip link add veth0 netns " + names_[0] + " type veth peer name veth0 netns " + names_[1]);
  } else if (hosts > 2) {
    switch_name_ = prefix_ + "switch";
    add("ip netns add " + switch_name_);
    add("ip -n " + switch_name_ + " link add br0 type bridge");
    add("ip -n " + switch_name_ + " link set br0 up");
    for (int h = 0; h < hosts; ++h) {
      const std::string port = "port" + std::to_string(h);
      add("ip link add veth0 netns " + names_[h] + " type veth peer name " + port + " netns " + switch_name_);
      add("ip -n " + switch_name_ + " link set " + port + " master br0");
      add("ip -n " + switch_name_ + " link set " + port + " up");
      if (!tbf.empty()) add("tc -n " + switch_name_ + " qdisc add dev " + port + tbf);
    }
  }
  if (hosts == 1) {
    add("ip -n " + names_[0] + " addr add " + addresses_[0] + "/32 dev lo");
  } else {
    for (int h = 0; h < hosts; ++h) {
      add("ip -n " + names_[h] + " addr add " + addresses_[h] + "/24 dev veth0");
      add("ip -n " + names_[h] + " link set veth0 up");
      const std::string cap = host_tbf(h);
      if (!cap.empty()) add("tc -n " + names_[h] + " qdisc add dev veth0" + cap);
    }
  }
  ShellResult made = run_shell(script);
  if (made.status != 0) {
    destroy();
    throw std::runtime_error("NamespaceHosts: `" + script + "` failed: " + made.output);
  }
}

NamespaceHosts::~NamespaceHosts() { destroy(); }

void NamespaceHosts::destroy() {
  // Deleting a namespace deletes its end of each veth pair, and so the pair.
  std::string script = "true";
  for (const auto& name : names_) script += "; ip netns del " + name + " 2>/dev/null";
  if (!switch_name_.empty()) script += "; ip netns del " + switch_name_ + " 2>/dev/null";
  run_shell(script + "; true");
}

std::string NamespaceHosts::host_id(int host) const {
  if (host < 0 || host >= size()) throw std::out_of_range("NamespaceHosts: no host " + std::to_string(host));
  return std::string("host") + static_cast<char>('A' + host);
}

void NamespaceHosts::enter(int host) const { enter_namespace(name(host)); }

void NamespaceHosts::enter_namespace(const std::string& name) {
  const std::string path = "/var/run/netns/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const int done = ::setns(fd, CLONE_NEWNET);
  const int error = errno;
  ::close(fd);
  if (done != 0) throw std::runtime_error("setns(" + path + ") failed: " + std::strerror(error));
}

CommConfig NamespaceHosts::config_of(int rank, int ranks_per_host, CommConfig base) const {
  const int host = host_of(rank, ranks_per_host);
  base.listen_address = address(host);
  base.host_id = host_id(host);
  return base;
}

ProcessOptions NamespaceHosts::process_options(int ranks_per_host, ProcessOptions base) const {
  base.store = StoreKind::file;
  base.before_rank = [names = names_, ranks_per_host](int rank) {
    const int host = host_of(rank, ranks_per_host);
    if (host < 0 || host >= static_cast<int>(names.size())) {
      throw std::runtime_error("rank " + std::to_string(rank) + " has no host: " + std::to_string(names.size()) +
                               " hosts of " + std::to_string(ranks_per_host) + " ranks");
    }
    enter_namespace(names[host]);
  };
  return base;
}

}  // namespace giant::ccl::test
