// `giant launch`: runs N ranks of a command on this machine (or in network
// namespaces of it), serving the store they meet at for the whole run.
//
// Each rank gets GIANT_RANK, GIANT_WORLD_SIZE, GIANT_LOCAL_RANK,
// GIANT_LOCAL_WORLD_SIZE, GIANT_STORE_ADDR and GIANT_SECRET_FILE (a 0600 file
// holding a fresh random secret, removed at exit), and GIANT_HOST_ID when
// hosts are given. See supervisor.h for how ranks are run and stopped.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "giant/ccl/bootstrap.h"
#include "giant/launch/emulated_cluster.h"
#include "giant/launch/host_spec.h"

namespace giant::launch {

struct LaunchOptions {
  std::vector<std::string> command;  // the program and its arguments
  int nproc = 0;                     // 0: the sum of the hosts' slots
  std::vector<HostSlots> hosts;      // empty: nproc ranks on `local`
  // Runs the ranks on an emulated cluster made for the launch (and removed
  // at its end) instead of `hosts`; nproc, if given, must match it.
  std::optional<EmulatedClusterSpec> emulate;
  // Where ranks reach the store: "HOST" or "HOST:PORT". Empty: 127.0.0.1 and
  // the store listens on loopback only. Otherwise it listens on 0.0.0.0 (on
  // PORT, or a free port). Required with netns hosts, which cannot reach
  // this machine's loopback.
  std::string store_address;
  double grace_seconds = 5.0;  // between SIGTERM and SIGKILL when stopping ranks
  // When a rank fails (not when the launcher is signalled), stop every rank
  // and start them all again, up to this many times, after
  // restart_backoff_seconds, with GIANT_TRAIN_RESUME=auto, so that `giant
  // train` goes on from the latest good checkpoint in its checkpoint.dir, and
  // GIANT_TRAIN_RESTART=K for the K-th restart.
  int max_restarts = 0;
  double restart_backoff_seconds = 1.0;
  // Passed on to every rank, with the launch variables above replaced and
  // GIANT_SECRET removed (the ranks must use the launcher's secret). Also
  // gives PATH (to find the command) and TMPDIR (for the secret file).
  ccl::Environment environment;
  int stdout_fd = 1;  // where the ranks' prefixed stdout and stderr lines go
  int stderr_fd = 2;
};

// Bad options (no command, nproc < 1, slots that do not sum to nproc, a
// missing namespace, a command not found, --emulate without root or with
// --hosts, a negative --max-restarts) throw giant::ConfigError before anything starts. Afterwards
// returns the exit status of the last attempt (see Supervisor::run): 0 only
// when every rank of it exited 0. The launcher's own lines ("giant launch:
// ...", each restart with its cause) go to log.
int run_launch(const LaunchOptions& options, std::ostream& log);

}  // namespace giant::launch
