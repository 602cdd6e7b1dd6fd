#include "giant/launch/launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <ostream>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/base/units.h"
#include "giant/ccl/store.h"
#include "giant/launch/lifeline.h"
#include "giant/launch/rank_process.h"
#include "giant/launch/repeated_failure.h"
#include "giant/launch/secret_file.h"
#include "giant/launch/signal_pipe.h"
#include "giant/launch/supervisor.h"

namespace giant::launch {
namespace {

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

struct StoreEndpoint {
  std::string bind_host = "127.0.0.1";
  std::string advertised_host = "127.0.0.1";
  int port = 0;  // 0: a free one
};

StoreEndpoint store_endpoint(const LaunchOptions& options, bool any_netns) {
  StoreEndpoint endpoint;
  const std::string& address = options.store_address;
  if (address.empty()) {
    if (any_netns) {
      throw ConfigError("--store-addr",
                        "--hosts names network namespaces, which cannot reach this machine's loopback: give "
                        "--store-addr ADDR, an address of this machine that the namespaces reach (e.g. the "
                        "host end of a veth pair)");
    }
    return endpoint;
  }
  auto colon = address.find(':');
  if (std::count(address.begin(), address.end(), ':') > 1) {
    throw ConfigError("--store-addr", "expected HOST or HOST:PORT (IPv4 or a host name), got '" + address + "'");
  }
  endpoint.bind_host = "0.0.0.0";
  endpoint.advertised_host = address.substr(0, colon);
  if (endpoint.advertised_host.empty()) {
    throw ConfigError("--store-addr", "expected HOST or HOST:PORT, got '" + address + "'");
  }
  if (colon != std::string::npos) {
    std::string text = address.substr(colon + 1);
    const char* end = text.data() + text.size();
    auto [parsed_to, err] = std::from_chars(text.data(), end, endpoint.port);
    if (text.empty() || err != std::errc() || parsed_to != end || endpoint.port < 1 || endpoint.port > 65535) {
      throw ConfigError("--store-addr", "PORT must be 1-65535, got '" + text + "' in '" + address + "'");
    }
  }
  return endpoint;
}

// The hosts to use: options.hosts, or nproc ranks on `local`.
std::vector<HostSlots> resolve_hosts(const LaunchOptions& options) {
  if (options.hosts.empty()) {
    if (options.nproc < 1) {
      throw ConfigError("--nproc", "the number of ranks must be at least 1, got " + std::to_string(options.nproc));
    }
    HostSlots local;
    local.kind = HostKind::local;
    local.slots = options.nproc;
    local.label = "local";
    return {local};
  }
  int slots = total_slots(options.hosts);
  if (options.nproc != 0 && options.nproc != slots) {
    std::string spec;
    for (const HostSlots& host : options.hosts) {
      spec += (spec.empty() ? "" : ",") + host.label + ":" + std::to_string(host.slots);
    }
    throw ConfigError("--nproc", "--nproc is " + std::to_string(options.nproc) + " but --hosts '" + spec +
                                     "' has " + std::to_string(slots) + " slots (omit --nproc to use the slots)");
  }
  return options.hosts;
}

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

std::string var_or(const ccl::Environment& env, const std::string& name, const std::string& fallback) {
  auto value = env.get(name);
  return value && !value->empty() ? *value : fallback;
}

// What each rank runs, checked before anything starts.
struct Commands {
  std::string local_executable;
  std::string ip_executable;  // for netns hosts
};

Commands resolve_commands(const LaunchOptions& options, const std::vector<HostSlots>& hosts) {
  Commands commands;
  const std::string path = var_or(options.environment, "PATH", kDefaultPath);
  commands.local_executable = find_executable(options.command[0], path);
  if (commands.local_executable.empty()) {
    throw ConfigError("command", "'" + options.command[0] + "' is not an executable file" +
                                     (options.command[0].find('/') == std::string::npos ? " on PATH" : ""));
  }
  for (const HostSlots& host : hosts) {
    if (host.kind != HostKind::netns) continue;
    if (!exists("/run/netns/" + host.netns) && !exists("/var/run/netns/" + host.netns)) {
      throw ConfigError("--hosts", "network namespace '" + host.netns +
                                       "' does not exist (create it with `ip netns add " + host.netns + "`)");
    }
    if (commands.ip_executable.empty()) {
      commands.ip_executable = find_executable("ip", path + ":" + kSbinPath);
      if (commands.ip_executable.empty()) {
        throw ConfigError("--hosts", "netns hosts need the `ip` command (iproute2), which is not installed");
      }
    }
  }
  return commands;
}

std::vector<std::string> env_list(const std::map<std::string, std::string>& vars) {
  std::vector<std::string> list;
  list.reserve(vars.size());
  for (const auto& [name, value] : vars) list.push_back(name + "=" + value);
  return list;
}

// What the launch runs where, checked before anything starts.
struct LaunchPlan {
  std::vector<HostSlots> hosts;
  StoreEndpoint endpoint;
  Commands commands;
};

LaunchPlan plan_launch(const LaunchOptions& options) {
  LaunchPlan plan;
  plan.hosts = resolve_hosts(options);
  bool any_netns = false;
  for (const HostSlots& host : plan.hosts) any_netns = any_netns || host.kind == HostKind::netns;
  plan.endpoint = store_endpoint(options, any_netns);
  plan.commands = resolve_commands(options, plan.hosts);
  return plan;
}

void check_options(const LaunchOptions& options) {
  if (options.command.empty() || options.command[0].empty()) {
    throw ConfigError("command", "no command to run (giant launch --nproc N -- COMMAND [ARGS...])");
  }
  if (options.nproc < 0) {
    throw ConfigError("--nproc", "the number of ranks must be at least 1, got " + std::to_string(options.nproc));
  }
  if (!(options.grace_seconds >= 0)) {
    throw ConfigError("--timeout-grace", "must be at least 0 seconds, got " + std::to_string(options.grace_seconds));
  }
  if (options.max_restarts < 0) {
    throw ConfigError("--max-restarts", "must be 0 or more, got " + std::to_string(options.max_restarts));
  }
  if (!(options.restart_backoff_seconds >= 0)) {
    throw ConfigError("--restart-backoff",
                      "must be at least 0 seconds, got " + std::to_string(options.restart_backoff_seconds));
  }
  if (!options.emulate) return;
  const EmulatedClusterSpec& spec = *options.emulate;
  if (!options.hosts.empty()) throw ConfigError("--emulate", "give --emulate or --hosts, not both");
  if (!options.store_address.empty()) {
    throw ConfigError("--store-addr", "--emulate serves the store on the emulated cluster's own network");
  }
  const int ranks = spec.hosts * spec.ranks_per_host;
  if (options.nproc != 0 && options.nproc != ranks) {
    throw ConfigError("--nproc", "--nproc is " + std::to_string(options.nproc) + " but --emulate " +
                                     std::to_string(spec.hosts) + "x" + std::to_string(spec.ranks_per_host) +
                                     " runs " + std::to_string(ranks) + " ranks (omit --nproc)");
  }
  const std::string why = emulation_unavailable_reason(var_or(options.environment, "PATH", kDefaultPath));
  if (!why.empty()) throw ConfigError("--emulate", why);
}

// How one attempt ended.
struct AttemptResult {
  int status = 0;
  std::string failure;  // how the first rank to fail ended; empty if none
  int stop_signal = 0;  // the first signal the launcher got; 0 if none
};

// Starts a rank of `plan` per placement and supervises them to the end.
AttemptResult run_ranks(const LaunchOptions& options, const LaunchPlan& plan, SignalPipe& signals,
                        std::ostream& log) {
  const std::vector<HostSlots>& hosts = plan.hosts;
  const std::vector<RankPlacement> placements = place_ranks(hosts);
  const int world_size = static_cast<int>(placements.size());

  // Order matters for teardown (reverse): ranks end before the store and
  // before the lifeline's watcher is told goodbye, and the store before the
  // secret file goes.
  const std::string secret = random_secret();
  SecretFile secret_file(var_or(options.environment, "TMPDIR", "/tmp"), secret);
  // Makes the ranks' process groups; kills them and removes the secret file
  // if this process dies without doing so itself.
  Lifeline lifeline(world_size, secret_file.path());
  ccl::TcpStoreServer server(plan.endpoint.bind_host, plan.endpoint.port, secret);
  const std::string store_address = plan.endpoint.advertised_host + ":" + std::to_string(server.port());
  Supervisor supervisor(options.stdout_fd, options.stderr_fd, options.grace_seconds, lifeline, log);

  std::map<std::string, std::string> vars = options.environment.vars();
  vars.erase("GIANT_SECRET");  // it would win over the file and fail the handshake
  vars["GIANT_SECRET_FILE"] = secret_file.path();
  vars["GIANT_WORLD_SIZE"] = std::to_string(world_size);
  vars["GIANT_STORE_ADDR"] = store_address;

  std::string host_list;
  for (const HostSlots& host : hosts) {
    host_list += (host_list.empty() ? "" : ",") + host.label + ":" + std::to_string(host.slots);
  }
  log << "giant launch: " + std::to_string(world_size) + " rank" + (world_size == 1 ? "" : "s") + " on " +
             host_list + ", store at " + store_address + "\n"
      << std::flush;

  for (const RankPlacement& placement : placements) {
    const HostSlots& host = hosts[placement.host_index];
    vars["GIANT_RANK"] = std::to_string(placement.rank);
    vars["GIANT_LOCAL_RANK"] = std::to_string(placement.local_rank);
    vars["GIANT_LOCAL_WORLD_SIZE"] = std::to_string(placement.local_world_size);
    // Namespaces share the hostname, so host identity comes from the launcher.
    if (!options.hosts.empty()) vars["GIANT_HOST_ID"] = placement.host_id;
    SpawnRequest request;
    request.env = env_list(vars);
    if (host.kind == HostKind::netns) {
      request.executable = plan.commands.ip_executable;
      request.argv = {"ip", "netns", "exec", host.netns};
      request.argv.insert(request.argv.end(), options.command.begin(), options.command.end());
    } else {
      request.executable = plan.commands.local_executable;
      request.argv = options.command;
    }
    if (!supervisor.start(host.label, request)) break;
  }
  AttemptResult result;
  result.status = supervisor.run(signals);
  result.failure = supervisor.failure();
  result.stop_signal = supervisor.stop_signal();
  return result;
}

// Waits out a restart's backoff; returns a stopping signal that came meanwhile (0: none).
int wait_backoff(double seconds, SignalPipe& signals) {
  const Deadline until = seconds > 0 ? Deadline::after_seconds(seconds) : Deadline::passed();
  do {
    pollfd watched{signals.read_fd(), POLLIN, 0};
    ::poll(&watched, 1, until.remaining_ms(1000));
    for (int signo : signals.take()) {
      if (signo != SIGCHLD) return signo;
    }
  } while (!until.expired());
  return 0;
}

// Runs the ranks, and again after each failure up to options.max_restarts
// times, resuming from the latest checkpoint.
int run_attempts(const LaunchOptions& options, const LaunchPlan& plan, SignalPipe& signals, std::ostream& log) {
  LaunchOptions attempt = options;
  std::optional<RepeatedFailure> failures;
  if (options.max_restarts > 0) {
    failures.emplace(var_or(options.environment, "TMPDIR", "/tmp"));
    std::map<std::string, std::string> vars = options.environment.vars();
    vars["GIANT_TRAIN_PROGRESS_FILE"] = failures->step_file();
    attempt.environment = ccl::Environment(std::move(vars));
  }
  for (int restart = 1;; ++restart) {
    const Stopwatch attempt_time;
    const AttemptResult result = run_ranks(attempt, plan, signals, log);
    if (result.failure.empty() || result.stop_signal != 0) return result.status;  // done, or asked to stop
    if (restart > options.max_restarts) {
      if (options.max_restarts > 0) {
        log << "giant launch: giving up after " << options.max_restarts << " restart"
            << (options.max_restarts == 1 ? "" : "s") << "; the last failure: " << result.failure << "\n"
            << std::flush;
      }
      return result.status;
    }
    if (failures->repeats(result.failure)) {
      log << "giant launch: " << result.failure << " at " << failures->where()
          << " again, as in the attempt before: a restart would fail the same way, so none follows (the last "
             "good checkpoint stays, for train.resume=auto once the cause is fixed)\n"
          << std::flush;
      return result.status;
    }
    log << "giant launch: restart " << restart << " of " << options.max_restarts << " after " << result.failure
        << " (the attempt ran " << format_seconds(attempt_time.seconds()) << "); starting every rank again "
        << (options.restart_backoff_seconds > 0 ? "in " + format_seconds(options.restart_backoff_seconds) : "at once")
        << " with train.resume=auto\n"
        << std::flush;
    if (const int signo = wait_backoff(options.restart_backoff_seconds, signals)) {
      log << "giant launch: got " << signal_name(signo) << " before the restart; not restarting\n" << std::flush;
      return 128 + signo;
    }
    std::map<std::string, std::string> vars = attempt.environment.vars();
    vars["GIANT_TRAIN_RESUME"] = "auto";
    vars["GIANT_TRAIN_RESTART"] = std::to_string(restart);
    attempt.environment = ccl::Environment(std::move(vars));
  }
}

}  // namespace

int run_launch(const LaunchOptions& options, std::ostream& log) {
  check_options(options);
  if (!options.emulate) {
    const LaunchPlan plan = plan_launch(options);
    SignalPipe signals;  // before any rank starts, so no signal is missed
    return run_attempts(options, plan, signals, log);
  }
  LaunchOptions on_cluster = options;
  on_cluster.emulate.reset();
  on_cluster.nproc = 0;
  resolve_commands(on_cluster, {});  // a command that is not found fails before the cluster is made
  // Signals are caught from here: one that comes while the cluster is made
  // stops the ranks as they start, and the cluster is removed after them.
  SignalPipe signals;
  const EmulatedCluster cluster(*options.emulate, var_or(options.environment, "PATH", kDefaultPath), log);
  on_cluster.hosts = cluster.hosts();
  on_cluster.store_address = cluster.store_host();
  return run_attempts(on_cluster, plan_launch(on_cluster), signals, log);
}

}  // namespace giant::launch
