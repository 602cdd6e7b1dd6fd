// A group of ranks that run collectives together.
//
// Operations on one communicator are matched across ranks by the order in
// which they are issued, so code issuing from two threads uses two
// communicators (see split). The communicator is thread-safe: any thread may
// issue, wait or abort. World size 1 passes straight through.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "giant/ccl/config.h"
#include "giant/ccl/store.h"

namespace giant::ccl {

namespace detail {
class Engine;
}

// Which ranks share a host, by host id (ccl.host_id, GIANT_HOST_ID; default_host_id()).
struct HostTopology {
  std::vector<std::string> host_ids;  // one per host, in order of first rank
  std::vector<int> host_of_rank;      // rank -> index into host_ids
  int host = 0;                       // this rank's host index
  int local_rank = 0;                 // position among the ranks of its host
  int local_size = 1;                 // ranks on this host
  std::vector<int> local_ranks;       // ranks on this host, ascending

  int num_hosts() const { return static_cast<int>(host_ids.size()); }
  bool same_host(int a, int b) const { return host_of_rank[a] == host_of_rank[b]; }
};

class Communicator {
 public:
  // Collective over `size` ranks: rendezvous through the store (keys under
  // "ccl/<name>/"), then connect to every peer. Throws TimeoutError if the
  // others do not arrive within config.connect_timeout.
  static std::shared_ptr<Communicator> create(std::shared_ptr<Store> store, int rank, int size,
                                              CommConfig config = {}, std::string name = "world");
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  const HostTopology& topology() const { return topology_; }
  // True when every host's ranks share memory (see ccl.transport), so the shm
  // and hierarchical algorithms can run.
  bool shared_memory() const;
  const CommConfig& config() const { return config_; }
  // The transport that carries collectives to `peer`: "shm" for a rank of
  // this host when shared memory is on, "tcp" otherwise, "self" for this
  // rank. Between ranks of one host, the automatic algorithms then run in
  // shared memory and point-to-point messages go through its rings
  // (shm_mailbox.h); an explicit ring or halving-doubling still uses tcp.
  std::string transport_to(int peer) const;

  // Collective: ranks with the same color form a new communicator, ordered by
  // (key, rank). A negative color takes no part and gets nullptr. The new
  // communicator has this one's config, or `config` (the same on every rank
  // of a color: it decides the algorithms they agree on).
  std::shared_ptr<Communicator> split(int color, int key);
  std::shared_ptr<Communicator> split(int color, int key, const CommConfig& config);

  // Fails every pending and future operation with a CommError naming this
  // rank, and tells the peers, whose operations fail the same way. Callable
  // from any thread; idempotent.
  void abort(const std::string& reason);
  // True once an error has broken the communicator.
  bool failed() const;

  // For ccl's own collectives.
  detail::Engine& engine() { return *engine_; }

 private:
  Communicator(std::shared_ptr<Store> store, int rank, int size, CommConfig config, std::string name);

  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  CommConfig config_;
  std::string name_;
  HostTopology topology_;
  std::atomic<int> splits_{0};
  std::unique_ptr<detail::Engine> engine_;
};

}  // namespace giant::ccl
