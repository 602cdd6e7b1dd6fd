#include "giant/ccl/config.h"

#include <unistd.h>

#include <cmath>
#include <fstream>

#include "giant/base/error.h"
#include "giant/base/tunables.h"

namespace giant::ccl {
namespace {

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

}  // namespace

void CommConfig::define_tunables(Tunables& t) {
  CommConfig d;
  t.define_seconds("ccl.timeout", d.timeout.count() / 1000.0,
                   "bound on one whole collective or point-to-point operation");
  t.define_seconds("ccl.connect_timeout", d.connect_timeout.count() / 1000.0,
                   "bound on rendezvous and connecting to every peer");
  t.define_int("ccl.tcp.sockets_per_peer", d.sockets_per_peer, "TCP data sockets per peer pair");
  t.define_bytes("ccl.segment_bytes", static_cast<int64_t>(d.segment_bytes),
                 "pipeline segment of ring and chain algorithms (0: chosen per call by the alpha-beta model)");
  t.define_bytes("ccl.allreduce.halving_doubling_max_bytes", static_cast<int64_t>(d.halving_doubling_max_bytes),
                 "automatic allreduce weighs halving-doubling up to this size (the other algorithms at any)");
  t.define_bytes("ccl.engine.chunk_bytes", static_cast<int64_t>(d.engine_chunk_bytes),
                 "allreduces larger than this run in chunks; more urgent operations overtake between them");
  t.define_string("ccl.transport", d.transport,
                  "between ranks of one host: auto (shared memory where possible) or tcp");
  t.define_bytes("ccl.shm.chunk_bytes", static_cast<int64_t>(d.shm_chunk_bytes),
                 "pipeline chunk of the shared-memory algorithms");
  t.define_real("ccl.model.shm_alpha_us", d.shm_alpha_us, "latency of a shared-memory step (microseconds)");
  t.define_real("ccl.model.shm_gbps", d.shm_gbps, "shared-memory bandwidth per rank (GB/s)");
  t.define_real("ccl.model.tcp_alpha_us", d.tcp_alpha_us, "latency of a TCP message (microseconds)");
  t.define_real("ccl.model.tcp_gbps", d.tcp_gbps, "TCP bandwidth per peer pair (GB/s)");
  t.define_string("ccl.listen_address", d.listen_address,
                  "address ranks listen on (empty: the one that reaches the store)");
  t.define_string("ccl.host_id", d.host_id, "host identity (empty: hostname plus network namespace)");
}

CommConfig CommConfig::from_tunables(const Tunables& t) {
  CommConfig c;
  c.timeout = to_ms(t.get_real("ccl.timeout"));
  c.connect_timeout = to_ms(t.get_real("ccl.connect_timeout"));
  c.sockets_per_peer = static_cast<int>(t.get_int("ccl.tcp.sockets_per_peer"));
  c.segment_bytes = static_cast<size_t>(t.get_int("ccl.segment_bytes"));
  c.halving_doubling_max_bytes = static_cast<size_t>(t.get_int("ccl.allreduce.halving_doubling_max_bytes"));
  c.engine_chunk_bytes = static_cast<size_t>(t.get_int("ccl.engine.chunk_bytes"));
  c.transport = t.get_string("ccl.transport");
  c.shm_chunk_bytes = static_cast<size_t>(t.get_int("ccl.shm.chunk_bytes"));
  c.shm_alpha_us = t.get_real("ccl.model.shm_alpha_us");
  c.shm_gbps = t.get_real("ccl.model.shm_gbps");
  c.tcp_alpha_us = t.get_real("ccl.model.tcp_alpha_us");
  c.tcp_gbps = t.get_real("ccl.model.tcp_gbps");
  c.listen_address = t.get_string("ccl.listen_address");
  c.host_id = t.get_string("ccl.host_id");
  if (c.sockets_per_peer < 1 || c.sockets_per_peer > 64) {
    throw ConfigError("ccl.tcp.sockets_per_peer", "must be between 1 and 64, got " +
                                                      std::to_string(c.sockets_per_peer));
  }
  if (c.segment_bytes != 0 && c.segment_bytes < 4096) {
    throw ConfigError("ccl.segment_bytes", "must be 0 (automatic) or at least 4 KiB");
  }
  if (c.timeout.count() <= 0) throw ConfigError("ccl.timeout", "must be positive");
  if (c.transport != "auto" && c.transport != "tcp") {
    throw ConfigError("ccl.transport", "must be auto or tcp, got '" + c.transport + "'");
  }
  if (c.shm_chunk_bytes < 4096) throw ConfigError("ccl.shm.chunk_bytes", "must be at least 4 KiB");
  if (c.engine_chunk_bytes < 65536) throw ConfigError("ccl.engine.chunk_bytes", "must be at least 64 KiB");
  for (auto [key, value] : {std::pair{"ccl.model.shm_alpha_us", c.shm_alpha_us}, {"ccl.model.shm_gbps", c.shm_gbps},
                            {"ccl.model.tcp_alpha_us", c.tcp_alpha_us}, {"ccl.model.tcp_gbps", c.tcp_gbps}}) {
    if (!(value > 0)) throw ConfigError(key, "must be positive");
  }
  return c;
}

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
