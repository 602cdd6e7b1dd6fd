// Bootstrap: how each launcher's environment is read, in which order, and
// that every bad value is a ConfigError naming its variable.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "giant/base/error.h"
#include "giant/base/tunables.h"
#include "giant/ccl/bootstrap.h"
#include "giant/ccl/config.h"

namespace giant::ccl {
namespace {

using Vars = std::map<std::string, std::string>;

BootstrapInfo resolve(const Vars& vars) { return resolve_bootstrap(Environment(vars)); }

// Expects a ConfigError whose key and message both name `variable`.
void expect_config_error(const Vars& vars, const std::string& variable) {
  try {
    BootstrapInfo info = resolve(vars);
    ADD_FAILURE() << "expected an error naming " << variable << ", got source " << info.source;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), variable) << e.what();
    EXPECT_NE(std::string(e.what()).find(variable), std::string::npos) << e.what();
  }
}

Vars with(Vars base, const Vars& extra) {
  for (const auto& [k, v] : extra) base[k] = v;
  return base;
}

const Vars kGiant = {{"GIANT_RANK", "2"},           {"GIANT_WORLD_SIZE", "4"},
                     {"GIANT_LOCAL_RANK", "0"},     {"GIANT_LOCAL_WORLD_SIZE", "2"},
                     {"GIANT_STORE_ADDR", "10.1.2.3:4567"}, {"GIANT_SECRET", "s3cret"}};
const Vars kTorchrun = {{"RANK", "3"},          {"WORLD_SIZE", "4"},          {"LOCAL_RANK", "1"},
                        {"LOCAL_WORLD_SIZE", "2"}, {"MASTER_ADDR", "trainer-0"}, {"MASTER_PORT", "29500"},
                        {"GIANT_SECRET", "s"}};
const Vars kSlurm = {{"SLURM_PROCID", "5"},          {"SLURM_NTASKS", "11"},
                     {"SLURM_LOCALID", "1"},         {"SLURM_NODEID", "1"},
                     {"SLURM_TASKS_PER_NODE", "4(x2),3"}, {"SLURM_JOB_NODELIST", "node[01-02,07]"},
                     {"GIANT_SECRET", "s"}};
const Vars kOpenMpi = {{"OMPI_COMM_WORLD_RANK", "3"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                       {"GIANT_STORE_ADDR", "head:7000"},   {"GIANT_SECRET", "s"}};

TEST(Bootstrap, NothingSetIsASingleProcess) {
  BootstrapInfo info = resolve({});
  EXPECT_EQ(info.source, "single");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.store_host, "");
  EXPECT_EQ(info.secret, "");
  EXPECT_EQ(info.host_id, "");
}

TEST(Bootstrap, Giant) {
  BootstrapInfo info = resolve(with(kGiant, {{"GIANT_HOST_ID", "fake-host-1"}}));
  EXPECT_EQ(info.source, "giant");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.store_host, "10.1.2.3");
  EXPECT_EQ(info.store_port, 4567);
  EXPECT_FALSE(info.rank0_serves_store);  // the launcher serves it
  EXPECT_EQ(info.secret, "s3cret");
  EXPECT_EQ(info.host_id, "fake-host-1");

  // Local rank and size default to 0 and 1; one rank needs no store or secret.
  info = resolve({{"GIANT_RANK", "0"}, {"GIANT_WORLD_SIZE", "1"}});
  EXPECT_EQ(info.source, "giant");
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.store_host, "");
}

TEST(Bootstrap, TorchrunStoreIsMasterPortPlusOne) {
  BootstrapInfo info = resolve(kTorchrun);
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.store_host, "trainer-0");
  EXPECT_EQ(info.store_port, 29501);
  EXPECT_TRUE(info.rank0_serves_store);

  info = resolve(with(kTorchrun, {{"GIANT_STORE_ADDR", "elsewhere:1000"}}));
  EXPECT_EQ(info.store_host, "elsewhere");
  EXPECT_EQ(info.store_port, 1000);
}

TEST(Bootstrap, GiantVariablesWinOverTorchrun) {
  BootstrapInfo info = resolve(with(kTorchrun, kGiant));
  EXPECT_EQ(info.source, "giant");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.store_host, "10.1.2.3");
  // torchrun wins over Slurm and Open MPI.
  info = resolve(with(with(kSlurm, kOpenMpi), kTorchrun));
  EXPECT_EQ(info.source, "torchrun");
  info = resolve(with(kOpenMpi, kSlurm));
  EXPECT_EQ(info.source, "slurm");
}

TEST(Bootstrap, Slurm) {
  BootstrapInfo info = resolve(kSlurm);
  EXPECT_EQ(info.source, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 11);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);  // node 1 of "4(x2),3"
  EXPECT_EQ(info.store_host, "node01");
  EXPECT_EQ(info.store_port, 29511);
  EXPECT_TRUE(info.rank0_serves_store);

  EXPECT_EQ(resolve(with(kSlurm, {{"SLURM_NODEID", "2"}})).local_world_size, 3);
  Vars no_node = kSlurm;
  no_node.erase("SLURM_NODEID");
  EXPECT_EQ(resolve(no_node).local_world_size, 4);  // the first count
  EXPECT_EQ(resolve(with(kSlurm, {{"SLURM_NTASKS_PER_NODE", "2"}})).local_world_size, 2);

  // Store address: GIANT_STORE_PORT, then MASTER_ADDR / MASTER_PORT + 1, then GIANT_STORE_ADDR.
  EXPECT_EQ(resolve(with(kSlurm, {{"GIANT_STORE_PORT", "1234"}})).store_port, 1234);
  info = resolve(with(kSlurm, {{"MASTER_ADDR", "boss"}, {"MASTER_PORT", "3000"}}));
  EXPECT_EQ(info.store_host, "boss");
  EXPECT_EQ(info.store_port, 3001);
  info = resolve(with(kSlurm, {{"GIANT_STORE_ADDR", "store:99"}, {"MASTER_ADDR", "boss"}}));
  EXPECT_EQ(info.store_host, "store");
  EXPECT_EQ(info.store_port, 99);
}

TEST(Bootstrap, SlurmNodeLists) {
  auto first_host = [](const std::string& nodelist) {
    return resolve(with(kSlurm, {{"SLURM_JOB_NODELIST", nodelist}})).store_host;
  };
  EXPECT_EQ(first_host("node[01-04,07],other"), "node01");
  EXPECT_EQ(first_host("node[07]"), "node07");
  EXPECT_EQ(first_host("solo"), "solo");
  EXPECT_EQ(first_host("a,b[1-2]"), "a");
  EXPECT_EQ(first_host("rack[1-2]-gpu[3,5]"), "rack1-gpu3");
  Vars old_style = kSlurm;
  old_style.erase("SLURM_JOB_NODELIST");
  old_style["SLURM_NODELIST"] = "cn[100-199]";
  EXPECT_EQ(resolve(old_style).store_host, "cn100");

  expect_config_error(with(kSlurm, {{"SLURM_JOB_NODELIST", "node[01-"}}), "SLURM_JOB_NODELIST");
  expect_config_error(with(kSlurm, {{"SLURM_JOB_NODELIST", "[]"}}), "SLURM_JOB_NODELIST");
  Vars no_host = kSlurm;
  no_host.erase("SLURM_JOB_NODELIST");
  expect_config_error(no_host, "SLURM_JOB_NODELIST");
  expect_config_error(with(kSlurm, {{"SLURM_TASKS_PER_NODE", "4(y2)"}}), "SLURM_TASKS_PER_NODE");
  expect_config_error(with(kSlurm, {{"SLURM_NODEID", "3"}}), "SLURM_TASKS_PER_NODE");
}

TEST(Bootstrap, OpenMpi) {
  BootstrapInfo info = resolve(kOpenMpi);
  EXPECT_EQ(info.source, "openmpi");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.store_host, "head");
  EXPECT_EQ(info.store_port, 7000);
  EXPECT_TRUE(info.rank0_serves_store);

  Vars master = kOpenMpi;
  master.erase("GIANT_STORE_ADDR");
  master["MASTER_ADDR"] = "boss";
  master["MASTER_PORT"] = "5000";
  EXPECT_EQ(resolve(master).store_port, 5001);
  Vars none = kOpenMpi;
  none.erase("GIANT_STORE_ADDR");
  expect_config_error(none, "GIANT_STORE_ADDR");
}

TEST(Bootstrap, SecretFromFile) {
  std::string name = "giant-secret-" + std::to_string(::getpid());
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  {
    std::ofstream out(path);
    out << "from-file\n";
  }
  Vars vars = kGiant;
  vars.erase("GIANT_SECRET");
  vars["GIANT_SECRET_FILE"] = path;
  EXPECT_EQ(resolve(vars).secret, "from-file");
  EXPECT_EQ(resolve(with(vars, {{"GIANT_SECRET", "direct"}})).secret, "direct");  // the variable wins
  std::filesystem::remove(path);
  expect_config_error(vars, "GIANT_SECRET_FILE");  // now unreadable
}

TEST(Bootstrap, MissingSecretIsAnError) {
  Vars vars = kGiant;
  vars.erase("GIANT_SECRET");
  expect_config_error(vars, "GIANT_SECRET");
  try {
    resolve(vars);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GIANT_SECRET_FILE"), std::string::npos) << e.what();
  }
  Vars torchrun = kTorchrun;
  torchrun.erase("GIANT_SECRET");
  expect_config_error(torchrun, "GIANT_SECRET");
}

TEST(Bootstrap, BadValuesNameTheirVariable) {
  expect_config_error(with(kGiant, {{"GIANT_RANK", "two"}}), "GIANT_RANK");
  expect_config_error(with(kGiant, {{"GIANT_RANK", "2x"}}), "GIANT_RANK");
  expect_config_error(with(kGiant, {{"GIANT_RANK", "4"}}), "GIANT_RANK");  // rank >= world size
  expect_config_error(with(kGiant, {{"GIANT_RANK", "-1"}}), "GIANT_RANK");
  expect_config_error(with(kGiant, {{"GIANT_WORLD_SIZE", "0"}}), "GIANT_WORLD_SIZE");
  expect_config_error(with(kGiant, {{"GIANT_WORLD_SIZE", ""}}), "GIANT_WORLD_SIZE");
  Vars no_size = kGiant;
  no_size.erase("GIANT_WORLD_SIZE");
  expect_config_error(no_size, "GIANT_WORLD_SIZE");
  expect_config_error(with(kGiant, {{"GIANT_LOCAL_RANK", "2"}}), "GIANT_LOCAL_RANK");
  expect_config_error(with(kGiant, {{"GIANT_LOCAL_WORLD_SIZE", "0"}}), "GIANT_LOCAL_WORLD_SIZE");

  Vars no_store = kGiant;
  no_store.erase("GIANT_STORE_ADDR");
  expect_config_error(no_store, "GIANT_STORE_ADDR");
  for (const char* bad : {"nohostport", "host:", ":123", "host:99999", "host:0", "host:abc"}) {
    SCOPED_TRACE(bad);
    expect_config_error(with(kGiant, {{"GIANT_STORE_ADDR", bad}}), "GIANT_STORE_ADDR");
  }
  BootstrapInfo v6 = resolve(with(kGiant, {{"GIANT_STORE_ADDR", "[::1]:80"}}));
  EXPECT_EQ(v6.store_host, "::1");
  EXPECT_EQ(v6.store_port, 80);

  expect_config_error(with(kTorchrun, {{"RANK", "x"}}), "RANK");
  expect_config_error(with(kTorchrun, {{"WORLD_SIZE", "3"}}), "RANK");
  expect_config_error(with(kTorchrun, {{"LOCAL_RANK", "5"}}), "LOCAL_RANK");
  expect_config_error(with(kTorchrun, {{"MASTER_PORT", "port"}}), "MASTER_PORT");
  expect_config_error(with(kTorchrun, {{"MASTER_PORT", "65535"}}), "MASTER_PORT");
  Vars no_master = kTorchrun;
  no_master.erase("MASTER_ADDR");
  expect_config_error(no_master, "MASTER_ADDR");
  Vars no_port = kTorchrun;
  no_port.erase("MASTER_PORT");
  expect_config_error(no_port, "MASTER_PORT");

  expect_config_error(with(kSlurm, {{"SLURM_PROCID", "11"}}), "SLURM_PROCID");
  expect_config_error(with(kSlurm, {{"SLURM_NTASKS", "many"}}), "SLURM_NTASKS");
  expect_config_error(with(kOpenMpi, {{"OMPI_COMM_WORLD_SIZE", "-4"}}), "OMPI_COMM_WORLD_SIZE");
}

TEST(Bootstrap, EnvironmentFromProcess) {
  ::setenv("GIANT_TEST_BOOTSTRAP_VAR", "a=b", 1);
  Environment env = Environment::from_process();
  EXPECT_EQ(env.get("GIANT_TEST_BOOTSTRAP_VAR"), std::optional<std::string>("a=b"));
  EXPECT_EQ(env.get("GIANT_TEST_SURELY_UNSET_VAR"), std::nullopt);
  ::unsetenv("GIANT_TEST_BOOTSTRAP_VAR");
}

TEST(Bootstrap, SingleProcessBootstrap) {
  Tunables tunables;
  CommConfig::define_tunables(tunables);
  Bootstrap boot = bootstrap_from_environment(Environment(Vars{{"GIANT_HOST_ID", "here"}}), tunables);
  EXPECT_EQ(boot.info.source, "single");
  ASSERT_NE(boot.world, nullptr);
  EXPECT_EQ(boot.world->rank(), 0);
  EXPECT_EQ(boot.world->size(), 1);
  EXPECT_EQ(boot.world->config().host_id, "here");
  EXPECT_EQ(boot.server, nullptr);
}

}  // namespace
}  // namespace giant::ccl
