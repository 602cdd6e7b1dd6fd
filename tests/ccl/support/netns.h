// Several "hosts" on one machine: network namespaces joined by veth pairs,
// each with its own address and, optionally, a `tc tbf` rate cap on every
// link end. Ranks forked by a ProcessGroup enter their host's namespace
// first thing, listen on its address and declare its host id ("hostA",
// "hostB", ...): namespaces share the hostname and /dev/shm, so the host id
// must never be derived from those.
//
// Two hosts are joined by one veth pair; more by a bridge in a namespace of
// its own. Nothing is created in the test process's namespace, so deleting
// the namespaces deletes everything; the destructor does it, and namespaces
// left by a test process that died are deleted by the next one.
//
// Creating namespaces needs root and iproute2 (`ip`, and `tc` for caps);
// tests skip with NamespaceHosts::unavailable_reason() where that is missing.
#pragma once

#include <string>
#include <vector>

#include "giant/ccl/config.h"
#include "ccl/support/ranks.h"

namespace giant::ccl::test {

struct NamespaceHostsOptions {
  int hosts = 2;
  // tc rate of every link end, e.g. "200mbit"; empty: no cap.
  std::string rate;
  // Per host, the cap of what it sends (its own link end), overriding `rate`
  // where given and non-empty: a link may be slower one way than the other.
  std::vector<std::string> host_rates;
  // tbf bucket and queue bound (tc syntax: "kb" is kilobytes). The bucket
  // must hold a whole GSO segment (64 KiB) or large sends stall.
  std::string burst = "256kb";
  std::string latency = "50ms";
};

class NamespaceHosts {
 public:
  // Empty when namespaces can be created here; otherwise why not (for GTEST_SKIP).
  static std::string unavailable_reason();
  static bool available() { return unavailable_reason().empty(); }

  // Creates the namespaces and links; throws std::runtime_error (with the
  // failing command's output) after removing what it made.
  explicit NamespaceHosts(NamespaceHostsOptions options = {});
  ~NamespaceHosts();
  NamespaceHosts(const NamespaceHosts&) = delete;
  NamespaceHosts& operator=(const NamespaceHosts&) = delete;

  int size() const { return static_cast<int>(names_.size()); }
  // The namespace of host h (under /var/run/netns).
  const std::string& name(int host) const { return names_.at(host); }
  // Host h's address (10.201.0.<h+1>), reachable from every other host.
  const std::string& address(int host) const { return addresses_.at(host); }
  // The declared host id of host h: "hostA", "hostB", ...
  std::string host_id(int host) const;
  const NamespaceHostsOptions& options() const { return options_; }

  // Moves the calling thread into host h's network namespace (in a forked
  // rank: the whole process). Throws std::runtime_error on failure.
  void enter(int host) const;
  static void enter_namespace(const std::string& name);

  // Ranks laid out host by host: ranks [h * ranks_per_host, (h + 1) *
  // ranks_per_host) live on host h.
  static int host_of(int rank, int ranks_per_host) { return rank / ranks_per_host; }
  // `base` with listen_address and host_id set for `rank`.
  CommConfig config_of(int rank, int ranks_per_host, CommConfig base = test_config()) const;
  // `base` with a FileStore (the test process's 127.0.0.1 is not reachable
  // from the namespaces; the file system is shared) and a before_rank hook
  // that enters the rank's namespace.
  ProcessOptions process_options(int ranks_per_host, ProcessOptions base = {}) const;

 private:
  void destroy();

  NamespaceHostsOptions options_;
  std::string prefix_;              // of every namespace this object made
  std::vector<std::string> names_;  // one per host
  std::string switch_name_;         // the bridge's namespace (more than 2 hosts)
  std::vector<std::string> addresses_;
};

// In a TEST body: skips the test, saying why, where namespaces cannot be made.
#define GIANT_SKIP_WITHOUT_NAMESPACES()                                                         \
  do {                                                                                          \
    const std::string giant_netns_why = ::giant::ccl::test::NamespaceHosts::unavailable_reason(); \
    if (!giant_netns_why.empty()) GTEST_SKIP() << giant_netns_why;                             \
  } while (0)

}  // namespace giant::ccl::test
