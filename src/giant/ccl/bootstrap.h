// The only reader of the process environment for rank, world size, local
// rank, store address and secret.
//
// Order: GIANT_* first, then torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT; Giant's store listens on MASTER_PORT + 1), then
// Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, ...) and Open MPI
// (OMPI_COMM_WORLD_RANK, ...). The secret comes from GIANT_SECRET or the file
// named by GIANT_SECRET_FILE.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"

namespace giant {
class Tunables;
}

namespace giant::ccl {

// A snapshot of environment variables; tests build one by hand.
class Environment {
 public:
  Environment() = default;
  explicit Environment(std::map<std::string, std::string> vars) : vars_(std::move(vars)) {}
  static Environment from_process();  // the one place ccl reads environ
  std::optional<std::string> get(const std::string& name) const;
  const std::map<std::string, std::string>& vars() const { return vars_; }

 private:
  std::map<std::string, std::string> vars_;
};

struct BootstrapInfo {
  std::string source;  // "giant", "torchrun", "slurm", "openmpi" or "single"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string store_host;  // empty for a single process
  int store_port = 0;
  // True when no launcher serves the store, so rank 0 must serve it
  // (torchrun, srun, mpirun).
  bool rank0_serves_store = false;
  std::string secret;
  std::string host_id;  // GIANT_HOST_ID, or empty for the default
};

// Throws ConfigError naming the variable that is missing or malformed.
BootstrapInfo resolve_bootstrap(const Environment& env);

// What a rank needs to keep alive while it communicates.
struct Bootstrap {
  BootstrapInfo info;
  std::unique_ptr<TcpStoreServer> server;  // when this rank serves the store
  std::shared_ptr<Store> store;            // null for a single process
  std::shared_ptr<Communicator> world;
};

// Resolves the environment, connects to (or serves) the store and creates the
// world communicator, with settings from the ccl.* tunables.
Bootstrap bootstrap_from_environment(const Environment& env, const Tunables& tunables);

}  // namespace giant::ccl
