#include "giant/ccl/config.h"

#include <unistd.h>

#include <vector>

#include "giant/base/error.h"
#include "giant/base/key_table.h"

namespace giant::ccl {
namespace {

using namespace keys;  // the table's rules and factories
using Row = KeyRow<CommConfig>;

template <class T>
Field<CommConfig, T> in(T CommConfig::*m) { return member(m); }

// 0 (automatic) or at least 4 KiB.
void check_segment_bytes(CommConfig& c) {
  if (c.segment_bytes != 0 && c.segment_bytes < 4096) {
    throw ConfigError("ccl.segment_bytes", "must be 0 (automatic) or at least 4 KiB, got " +
                                               std::to_string(c.segment_bytes));
  }
}

std::vector<Row> make_ccl_keys() {
  using C = CommConfig;
  std::vector<Row> keys;
  keys.push_back(duration("ccl.timeout", in(&C::timeout), positive(),
                          "bound on one whole collective or point-to-point operation"));
  keys.push_back(duration("ccl.connect_timeout", in(&C::connect_timeout), positive(),
                          "bound on rendezvous and connecting to every peer"));
  keys.push_back(integer("ccl.tcp.sockets_per_peer", in(&C::sockets_per_peer), between(0, 64),
                         "TCP data sockets per peer pair (0: 2, or 1 where ccl.model.tcp_gbps is under 1 Gbit/s)"));
  keys.push_back(accepting(
      followed_by(bytes("ccl.segment_bytes", in(&C::segment_bytes), not_negative(),
                        "pipeline segment of ring and chain algorithms (0: chosen per call by the alpha-beta model); "
                        "no longer than ccl.model.tcp_gbps carries in 10 ms, or 64 KiB"),
                  check_segment_bytes),
      "0 or >= 4096"));
  keys.push_back(bytes("ccl.allreduce.halving_doubling_max_bytes", in(&C::halving_doubling_max_bytes),
                       not_negative(),
                       "automatic allreduce weighs halving-doubling up to this size (the other algorithms at any)"));
  keys.push_back(bytes("ccl.engine.chunk_bytes", in(&C::engine_chunk_bytes), at_least(65536),
                       "allreduces larger than this run in chunks; more urgent operations overtake between them"));
  keys.push_back(choice("ccl.transport", in(&C::transport), Names<std::string>{{"auto", "auto"}, {"tcp", "tcp"}},
                        "between ranks of one host: auto (shared memory where possible) or tcp"));
  keys.push_back(bytes("ccl.shm.chunk_bytes", in(&C::shm_chunk_bytes), at_least(4096),
                       "pipeline chunk of the shared-memory algorithms"));
  keys.push_back(real("ccl.model.shm_alpha_us", in(&C::shm_alpha_us), positive(),
                      "latency of a shared-memory step (microseconds)"));
  keys.push_back(real("ccl.model.shm_gbps", in(&C::shm_gbps), positive(), "shared-memory bandwidth per rank (GB/s)"));
  keys.push_back(real("ccl.model.tcp_alpha_us", in(&C::tcp_alpha_us), positive(),
                      "latency of a TCP message (microseconds)"));
  keys.push_back(real("ccl.model.tcp_gbps", in(&C::tcp_gbps), positive(), "TCP bandwidth per peer pair (GB/s)"));
  keys.push_back(text("ccl.listen_address", in(&C::listen_address), Empty::allowed,
                      "address ranks listen on (empty: the one that reaches the store)"));
  keys.push_back(text("ccl.host_id", in(&C::host_id), Empty::allowed,
                      "host identity (empty: hostname plus network namespace)"));
  return keys;
}

}  // namespace

const std::vector<keys::KeyRow<CommConfig>>& ccl_keys() {
  static const std::vector<Row> table = make_ccl_keys();  // immutable once built
  return table;
}

void CommConfig::define_tunables(Tunables& t) { keys::define_keys(ccl_keys(), t); }

CommConfig CommConfig::from_tunables(const Tunables& t) { return keys::read_keys(ccl_keys(), t); }

std::string default_host_id() {
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  // Network namespaces share the hostname; tell them apart by the namespace.
  char ns[128] = {0};
  ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  std::string id = name;
  if (n > 0) id += "/" + std::string(ns, static_cast<size_t>(n));
  return id;
}

}  // namespace giant::ccl
