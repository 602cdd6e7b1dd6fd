// A group of ranks that run collectives together.
//
// Operations on one communicator are matched across ranks by the order in
// which they are issued, so code issuing from two threads uses two
// communicators (see split). The communicator is thread-safe: any thread may
// issue, wait or abort. World size 1 passes straight through.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "giant/ccl/config.h"
#include "giant/ccl/store.h"
#include "giant/ccl/types.h"

namespace giant::ccl {

namespace detail {
class Engine;
}
class Backend;

// What a device backend is made from: the communicator's ranks, its config,
// and a store prefix of its own for the backend's rendezvous (null store for
// a communicator of one rank).
struct DeviceBackendContext {
  std::shared_ptr<Store> store;
  std::string store_prefix;
  int rank = 0;
  int size = 1;
  std::string name;  // the communicator's, for messages
  CommConfig config;
  // True once the communicator's host side has learned of a fault (a peer
  // aborted, died or timed out): the device backend's watchdog then fails
  // its pending operations instead of waiting for their timeout.
  std::function<bool()> host_failed;
};

// Makes a communicator's device backend. Collective: every rank of the
// communicator calls it at the same operation. Empty: the backend ccl was
// built with (see default_device_backend).
using DeviceBackendFactory = std::function<std::unique_ptr<Backend>(const DeviceBackendContext&)>;

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
  // others do not arrive within config.connect_timeout. device_backend makes
  // the device backend on the first device operation (empty: this build's,
  // default_device_backend in backend.h); communicators split from this one
  // use it too.
  static std::shared_ptr<Communicator> create(std::shared_ptr<Store> store, int rank, int size,
                                              CommConfig config = {}, std::string name = "world",
                                              DeviceBackendFactory device_backend = {});
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
  // rank, and tells the peers, whose operations fail the same way (on every
  // backend made so far). Callable from any thread; idempotent.
  void abort(const std::string& reason);
  // True once an error has broken the communicator (any of its backends).
  bool failed() const;
  // What this rank waits on here: its host operations issued and not yet
  // finished, oldest first, each with how long ago it was issued (device
  // operations are not listed). For the report of a rank that hangs.
  std::vector<std::string> waiting_operations() const;

  // The backend that runs operations on `memory` (backend.h). The device
  // backend is made on first use, which is collective: every rank asks for
  // it at the same operation, as every rank issues operations in one order.
  Backend& backend(Memory memory);
  // For ccl's own host algorithms.
  detail::Engine& engine() { return *engine_; }

 private:
  Communicator(std::shared_ptr<Store> store, int rank, int size, CommConfig config, std::string name,
               DeviceBackendFactory device_backend);

  std::shared_ptr<Store> store_;
  int rank_;
  int size_;
  CommConfig config_;
  std::string name_;
  HostTopology topology_;
  std::atomic<int> splits_{0};
  std::string store_prefix_;  // this communicator's keys in the store
  std::unique_ptr<detail::Engine> engine_;
  std::unique_ptr<Backend> host_backend_;
  DeviceBackendFactory device_factory_;
  mutable std::mutex device_mutex_;
  std::unique_ptr<Backend> device_backend_;  // under device_mutex_
  std::string abort_reason_;                 // under device_mutex_: an abort before the device backend was made
};

}  // namespace giant::ccl
