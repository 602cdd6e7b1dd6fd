// Settings of a communicator, and the table of ccl.* keys they come from.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "giant/base/key_table.h"

namespace giant::ccl {

struct CommConfig {
  // Bound on a whole operation, from the moment it starts executing.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Bound on rendezvous: waiting for all ranks and connecting to them.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(120)};
  // TCP data sockets per peer pair; large messages are striped over them.
  // 0 chooses by the cost model's TCP link (cost_model.h, data_sockets_per_peer).
  int sockets_per_peer = 0;
  // Pipeline segment of ring and chain algorithms; 0 chooses it per call
  // from the alpha-beta model (cost_model.h, pipeline_segment_bytes). Fixed
  // by default: on loopback TCP over 2 cores, 1 to 4 MiB segments measured
  // best at every size (pipelining cannot help when the CPU is the link).
  // Either way no longer than a slow TCP link carries in 10 ms
  // (cost_model.h, link_segment_bytes).
  size_t segment_bytes = 1 << 20;
  // Automatic allreduce weighs halving-doubling up to this size (algorithm_choice.h).
  size_t halving_doubling_max_bytes = 256 << 10;
  // Allreduces larger than this run in chunks of it; more urgent operations
  // (OpOptions::priority) overtake at chunk boundaries.
  size_t engine_chunk_bytes = 8 << 20;
  // Between ranks of one host: "auto" uses shared memory where it can be set
  // up (tcp otherwise), "tcp" never does.
  std::string transport = "auto";
  // Pipeline chunk of the shared-memory algorithms (per rank, two in flight).
  size_t shm_chunk_bytes = 512 << 10;
  // Alpha-beta costs per link kind (latency in microseconds, bandwidth in
  // GB/s), for the automatic choice of algorithm and segment size.
  double shm_alpha_us = 1.0;
  double shm_gbps = 5.0;
  double tcp_alpha_us = 40.0;
  double tcp_gbps = 1.2;
  // Address to listen on; empty chooses the one that reaches the store.
  std::string listen_address;
  // Host identity; empty means hostname plus network namespace.
  std::string host_id;

  // Defines ccl.* in the registry with the defaults above.
  static void define_tunables(Tunables& tunables);
  // Reads them: a ConfigError naming the key for a value ccl_keys() refuses.
  static CommConfig from_tunables(const Tunables& tunables);
};

// The ccl.* keys, each declared once: name, field, accepted values, help
// (the defaults are CommConfig's initial values).
const std::vector<keys::KeyRow<CommConfig>>& ccl_keys();

// Hostname plus network namespace, e.g. "node7/net:[4026531992]".
std::string default_host_id();

}  // namespace giant::ccl
