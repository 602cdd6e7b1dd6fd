// Bootstrap: who am I, how many are we, where is the store, what is the
// secret. See bootstrap.h for the order in which launchers are recognised.
#include "giant/ccl/bootstrap.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "giant/base/error.h"
#include "giant/base/logging.h"
#include "giant/ccl/config.h"

extern char** environ;

namespace giant::ccl {
namespace {

// Used when Slurm gives a store host but nobody names a port.
constexpr int kDefaultSlurmStorePort = 29511;

std::optional<std::string> non_empty(const Environment& env, const std::string& name) {
  auto value = env.get(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::string require(const Environment& env, const std::string& name, const std::string& why) {
  auto value = non_empty(env, name);
  if (!value) throw ConfigError(name, "environment variable " + name + " is not set (" + why + ")");
  return *value;
}

int parse_int(const std::string& name, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [parsed_to, err] = std::from_chars(text.data(), end, value);
  if (text.empty() || err != std::errc() || parsed_to != end) {
    throw ConfigError(name, "environment variable " + name + " must be an integer, got '" + text + "'");
  }
  return value;
}

int int_var(const Environment& env, const std::string& name, std::optional<int> fallback,
            const std::string& why) {
  auto value = non_empty(env, name);
  if (value) return parse_int(name, *value);
  if (fallback) return *fallback;
  return parse_int(name, require(env, name, why));  // require throws
}

int parse_port(const std::string& name, const std::string& text) {
  int port = parse_int(name, text);
  if (port <= 0 || port > 65535) {
    throw ConfigError(name, "environment variable " + name + " must be a TCP port (1-65535), got '" + text + "'");
  }
  return port;
}

// "host:port", or "[v6 address]:port".
void parse_host_port(const std::string& name, const std::string& text, BootstrapInfo* info) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw ConfigError(name, "environment variable " + name + " must be host:port, got '" + text + "'");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  info->store_host = host;
  info->store_port = parse_port(name, text.substr(colon + 1));
}

// The first host of a Slurm node list: "node[01-04,07],other" -> "node01",
// "rack[1-2]-gpu[3,5]" -> "rack1-gpu3".
std::string first_slurm_host(const std::string& name, const std::string& nodelist) {
  std::string host;
  size_t i = 0;
  while (i < nodelist.size() && nodelist[i] != ',') {
    if (nodelist[i] != '[') {
      host += nodelist[i++];
      continue;
    }
    auto close = nodelist.find(']', i);
    if (close == std::string::npos) {
      throw ConfigError(name, "environment variable " + name + " has an unclosed '[': '" + nodelist + "'");
    }
    std::string range = nodelist.substr(i + 1, close - i - 1);
    std::string first = range.substr(0, range.find_first_of(",-"));
    if (first.empty()) {
      throw ConfigError(name, "environment variable " + name + " has an empty range: '" + nodelist + "'");
    }
    host += first;
    i = close + 1;
  }
  if (host.empty()) throw ConfigError(name, "environment variable " + name + " names no host: '" + nodelist + "'");
  return host;
}

// Tasks on node `node_index` from SLURM_TASKS_PER_NODE ("4(x2),3": 4 on
// nodes 0 and 1, 3 on node 2). Without a node index, the first count.
int slurm_tasks_on_node(const std::string& name, const std::string& spec, std::optional<int> node_index) {
  int node = 0;
  std::istringstream groups(spec);
  std::string group;
  int first_count = -1;
  while (std::getline(groups, group, ',')) {
    int count = 0;
    int repeat = 1;
    auto paren = group.find('(');
    if (paren == std::string::npos) {
      count = parse_int(name, group);
    } else {
      if (group.size() < paren + 4 || group.compare(paren, 2, "(x") != 0 || group.back() != ')') {
        throw ConfigError(name, "environment variable " + name + " is malformed: '" + spec + "'");
      }
      count = parse_int(name, group.substr(0, paren));
      repeat = parse_int(name, group.substr(paren + 2, group.size() - paren - 3));
    }
    if (count <= 0 || repeat <= 0) {
      throw ConfigError(name, "environment variable " + name + " is malformed: '" + spec + "'");
    }
    if (first_count < 0) first_count = count;
    if (!node_index) return first_count;
    if (*node_index < node + repeat) return count;
    node += repeat;
  }
  if (first_count < 0) throw ConfigError(name, "environment variable " + name + " is empty");
  throw ConfigError(name, "environment variable " + name + " ('" + spec + "') lists fewer nodes than node " +
                              std::to_string(*node_index));
}

// Store address for launchers that have no store of their own: GIANT_STORE_ADDR;
// else the host from MASTER_ADDR (or fallback_host) with the port from
// GIANT_STORE_PORT, else MASTER_PORT + 1 (that port is torchrun's own store), else
// default_port (0: none).
void resolve_store_address(const Environment& env, const std::string& host_var,
                           std::optional<std::string> fallback_host, int default_port, BootstrapInfo* info) {
  if (auto addr = non_empty(env, "GIANT_STORE_ADDR")) {
    parse_host_port("GIANT_STORE_ADDR", *addr, info);
    return;
  }
  auto host = non_empty(env, "MASTER_ADDR");
  if (!host) host = fallback_host;
  if (!host) {
    throw ConfigError(host_var, "environment variable " + host_var +
                                    " is not set: set GIANT_STORE_ADDR=host:port, or MASTER_ADDR and "
                                    "MASTER_PORT, so that ranks find the store");
  }
  info->store_host = *host;
  if (auto port = non_empty(env, "GIANT_STORE_PORT")) {
    info->store_port = parse_port("GIANT_STORE_PORT", *port);
  } else if (auto master_port = non_empty(env, "MASTER_PORT")) {
    int port = parse_port("MASTER_PORT", *master_port);
    if (port == 65535) throw ConfigError("MASTER_PORT", "MASTER_PORT is 65535, so MASTER_PORT + 1 is no port");
    info->store_port = port + 1;
  } else if (default_port > 0) {
    info->store_port = default_port;
  } else {
    throw ConfigError("MASTER_PORT", "environment variable MASTER_PORT is not set (the store listens on "
                                     "MASTER_PORT + 1); or set GIANT_STORE_ADDR=host:port");
  }
}

std::string read_secret_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  if (in) contents << in.rdbuf();
  if (!in || in.bad()) {
    throw ConfigError("GIANT_SECRET_FILE",
                      "cannot read the secret file named by GIANT_SECRET_FILE: '" + path + "'");
  }
  std::string secret = contents.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) {
    throw ConfigError("GIANT_SECRET_FILE", "the secret file named by GIANT_SECRET_FILE is empty: '" + path + "'");
  }
  return secret;
}

void check_ranks(const BootstrapInfo& info, const std::string& rank_var, const std::string& size_var,
                 const std::string& local_rank_var, const std::string& local_size_var) {
  auto fail = [](const std::string& var, const std::string& what) {
    throw ConfigError(var, "environment variable " + var + " " + what);
  };
  if (info.world_size < 1) fail(size_var, "must be at least 1, got " + std::to_string(info.world_size));
  if (info.rank < 0 || info.rank >= info.world_size) {
    fail(rank_var, "must be in [0, " + std::to_string(info.world_size) + ") (" + size_var + "=" +
                       std::to_string(info.world_size) + "), got " + std::to_string(info.rank));
  }
  if (info.local_world_size < 1) {
    fail(local_size_var, "must be at least 1, got " + std::to_string(info.local_world_size));
  }
  if (info.local_rank < 0 || info.local_rank >= info.local_world_size) {
    fail(local_rank_var, "must be in [0, " + std::to_string(info.local_world_size) + "), got " +
                             std::to_string(info.local_rank));
  }
}

}  // namespace

Environment Environment::from_process() {
  std::map<std::string, std::string> vars;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string text = *entry;
    auto eq = text.find('=');
    if (eq == std::string::npos) continue;
    vars.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return Environment(std::move(vars));
}

std::optional<std::string> Environment::get(const std::string& name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

// Rank, world size, local rank and local world size from one launcher's
// four variables (the local ones optional).
void read_ranks(const Environment& env, const std::string& rank_var, const std::string& size_var,
                const std::string& local_rank_var, const std::string& local_size_var, BootstrapInfo* info) {
  info->rank = int_var(env, rank_var, std::nullopt, "needed to know this process's rank");
  info->world_size = int_var(env, size_var, std::nullopt, rank_var + " is set");
  info->local_rank = int_var(env, local_rank_var, 0, "");
  info->local_world_size = int_var(env, local_size_var, 1, "");
  check_ranks(*info, rank_var, size_var, local_rank_var, local_size_var);
}

BootstrapInfo resolve_bootstrap(const Environment& env) {
  BootstrapInfo info;
  if (non_empty(env, "GIANT_RANK")) {
    // Set by `giant launch`, which also serves the store.
    info.source = "giant";
    read_ranks(env, "GIANT_RANK", "GIANT_WORLD_SIZE", "GIANT_LOCAL_RANK", "GIANT_LOCAL_WORLD_SIZE", &info);
    if (info.world_size > 1) {
      parse_host_port("GIANT_STORE_ADDR",
                      require(env, "GIANT_STORE_ADDR", "the launcher's store, as host:port"), &info);
    }
    info.rank0_serves_store = false;
  } else if (non_empty(env, "RANK") && non_empty(env, "WORLD_SIZE")) {
    info.source = "torchrun";
    read_ranks(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", &info);
    if (info.world_size > 1) resolve_store_address(env, "MASTER_ADDR", std::nullopt, 0, &info);
    info.rank0_serves_store = true;
  } else if (non_empty(env, "SLURM_PROCID")) {
    info.source = "slurm";
    info.rank = int_var(env, "SLURM_PROCID", std::nullopt, "needed to know this process's rank");
    std::string size_var = non_empty(env, "SLURM_NTASKS") || !non_empty(env, "SLURM_NPROCS") ? "SLURM_NTASKS"
                                                                                             : "SLURM_NPROCS";
    info.world_size = int_var(env, size_var, std::nullopt, "SLURM_PROCID is set");
    info.local_rank = int_var(env, "SLURM_LOCALID", 0, "");
    std::string local_size_var = "SLURM_NTASKS_PER_NODE";
    if (auto per_node = non_empty(env, "SLURM_NTASKS_PER_NODE")) {
      info.local_world_size = parse_int(local_size_var, *per_node);
    } else if (auto tasks = non_empty(env, "SLURM_TASKS_PER_NODE")) {
      local_size_var = "SLURM_TASKS_PER_NODE";
      std::optional<int> node;
      if (auto node_id = non_empty(env, "SLURM_NODEID")) node = parse_int("SLURM_NODEID", *node_id);
      info.local_world_size = slurm_tasks_on_node(local_size_var, *tasks, node);
    }
    check_ranks(info, "SLURM_PROCID", size_var, "SLURM_LOCALID", local_size_var);
    if (info.world_size > 1) {
      // The node list is only a fallback, so it is parsed only when needed.
      std::optional<std::string> first_host;
      std::string nodelist_var = non_empty(env, "SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
      auto nodelist = non_empty(env, nodelist_var);
      if (nodelist && !non_empty(env, "GIANT_STORE_ADDR") && !non_empty(env, "MASTER_ADDR")) {
        first_host = first_slurm_host(nodelist_var, *nodelist);
      }
      resolve_store_address(env, "SLURM_JOB_NODELIST", first_host, kDefaultSlurmStorePort, &info);
    }
    info.rank0_serves_store = true;
  } else if (non_empty(env, "OMPI_COMM_WORLD_RANK")) {
    info.source = "openmpi";
    read_ranks(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
               "OMPI_COMM_WORLD_LOCAL_SIZE", &info);
    if (info.world_size > 1) resolve_store_address(env, "GIANT_STORE_ADDR", std::nullopt, 0, &info);
    info.rank0_serves_store = true;
  } else {
    info.source = "single";
  }

  if (auto secret = non_empty(env, "GIANT_SECRET")) {
    info.secret = *secret;
  } else if (auto path = non_empty(env, "GIANT_SECRET_FILE")) {
    info.secret = read_secret_file(*path);
  } else if (info.world_size > 1) {
    throw ConfigError("GIANT_SECRET", "the store needs a shared secret: set GIANT_SECRET or GIANT_SECRET_FILE (" +
                                          info.source + " launch with " + std::to_string(info.world_size) +
                                          " ranks)");
  }
  if (auto host_id = non_empty(env, "GIANT_HOST_ID")) info.host_id = *host_id;
  return info;
}

Bootstrap bootstrap_from_environment(const Environment& env, const Tunables& tunables) {
  Bootstrap boot;
  boot.info = resolve_bootstrap(env);
  const BootstrapInfo& info = boot.info;
  CommConfig config = CommConfig::from_tunables(tunables);
  if (!info.host_id.empty()) config.host_id = info.host_id;
  if (info.world_size == 1) {
    boot.world = Communicator::create(std::make_shared<MemoryStore>(), 0, 1, config);
    return boot;
  }
  configure_logging("[rank " + std::to_string(info.rank) + "] ", log_level());
  if (info.rank0_serves_store && info.rank == 0) {
    boot.server = std::make_unique<TcpStoreServer>("0.0.0.0", info.store_port, info.secret);
  }
  boot.store = std::make_shared<TcpStore>(info.store_host, info.store_port, info.secret, config.connect_timeout);
  boot.world = Communicator::create(boot.store, info.rank, info.world_size, config);
  return boot;
}

}  // namespace giant::ccl
