// parallel.auto without a cluster file: the cluster measured on the run's
// ranks (ranks as threads here, two "hosts" told apart by their host ids;
// end to end on an emulated cluster in test_auto_cluster.cc): every rank
// gets the same cluster, in the time budget, of the shape the ranks make,
// and hosts of different sizes are refused by name. The mesh's groups then
// choose ccl's algorithms on the known cluster's links.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/ccl/collectives.h"
#include "giant/planner/comm_model.h"
#include "giant/planner/spec_toml.h"
#include "giant/train/cluster_probe.h"
#include "giant/train/run_topology.h"
#include "train/support/thread_ranks.h"

namespace giant::train {
namespace {

using test::on_ranks;

TEST(ClusterProbe, OneProcessAloneIsOneHostOfOneDevice) {
  ClusterProbeOptions options;
  options.budget_s = 10;
  const MeasuredCluster measured = measure_cluster(nullptr, options);
  EXPECT_EQ(measured.cluster.hosts, 1);
  EXPECT_EQ(measured.cluster.devices_per_host, 1);
  EXPECT_GT(measured.cluster.device.peak_flops, 1e8);
  EXPECT_GT(measured.cluster.device.elementwise_bytes_per_s, 1e7);
  EXPECT_EQ(measured.cluster.device.element_bytes(), 4);  // fp32, as asked
  EXPECT_LE(measured.seconds, options.budget_s);
  EXPECT_NO_THROW(measured.cluster.validate());
  EXPECT_NE(measured.summary.find("1 host(s) x 1 rank(s)"), std::string::npos) << measured.summary;
}

TEST(ClusterProbe, EveryRankGetsTheSameClusterOfTheRanksHostsWithinTheBudget) {
  const std::vector<std::string> hosts{"a", "a", "b", "b"};
  std::vector<MeasuredCluster> results(hosts.size());
  ClusterProbeOptions options;
  options.budget_s = 20;
  on_ranks(hosts, [&](int rank, const std::shared_ptr<ccl::Communicator>& world) {
    results[rank] = measure_cluster(world.get(), options);
  });
  const planner::ClusterSpec& c = results[0].cluster;
  std::printf("%s\n", results[0].summary.c_str());
  EXPECT_EQ(c.hosts, 2);
  EXPECT_EQ(c.devices_per_host, 2);
  EXPECT_GT(c.intra_host.bandwidth_bytes_per_s, 0);
  EXPECT_GT(c.inter_host.bandwidth_bytes_per_s, 0);
  EXPECT_GT(c.inter_host.latency_s, 0);
  EXPECT_LE(results[0].seconds, options.budget_s) << results[0].summary;
  const std::string written = planner::cluster_to_toml(c);
  for (size_t r = 1; r < results.size(); ++r) {
    EXPECT_EQ(planner::cluster_to_toml(results[r].cluster), written) << "rank " << r << " measured another cluster";
    EXPECT_EQ(results[r].seconds, results[0].seconds) << r;
  }
  // What is written reads back as the same cluster (giant plan --cluster FILE).
  EXPECT_EQ(planner::cluster_to_toml(planner::parse_cluster_toml(written)), written);
}

TEST(ClusterProbe, HostsOfDifferentSizesAreRefusedNamingTheKey) {
  const std::vector<std::string> hosts{"a", "a", "b"};
  std::mutex mutex;
  std::vector<std::string> keys;
  on_ranks(hosts, [&](int, const std::shared_ptr<ccl::Communicator>& world) {
    try {
      measure_cluster(world.get(), {});
    } catch (const ConfigError& e) {
      std::lock_guard lock(mutex);
      keys.push_back(e.key());
      EXPECT_NE(std::string(e.what()).find("host 'b' runs 1 rank(s) and host 'a' 2"), std::string::npos) << e.what();
    }
  });
  EXPECT_EQ(keys, (std::vector<std::string>(3, "parallel.cluster")));  // every rank, before any collective
}

// A known cluster (measured, or parallel.cluster) gives the mesh's groups
// its links as ccl's cost model, unless ccl.model.* were set by hand; the
// world keeps its own. The groups then run (a 1 MiB allreduce, exact).
TEST(ClusterProbe, TheMeshsGroupsChooseOnTheKnownClustersLinks) {
  planner::ClusterSpec cluster = planner::cluster_preset("v100-tcp");
  cluster.hosts = 2;
  cluster.devices_per_host = 2;
  cluster.intra_host = {planner::Transport::shm, 8e9, 2e-6, 1};
  cluster.inter_host = {planner::Transport::tcp, 1.25e6, 3e-4, 1};
  const ccl::CommConfig linked = planner::with_cluster_links({}, cluster);
  for (const bool set_by_hand : {false, true}) {
    ParallelSettings parallel;
    parallel.known_cluster = cluster;
    parallel.ccl_model_set = set_by_hand;
    std::mutex mutex;
    std::vector<std::string> notes;
    on_ranks({"a", "a", "b", "b"}, [&](int, const std::shared_ptr<ccl::Communicator>& world) {
      const double world_gbps = world->config().tcp_gbps;
      std::string note;
      const auto mesh = make_mesh(world, {4, 1, 1}, parallel, note);
      EXPECT_EQ(mesh->world().config().tcp_gbps, world_gbps);
      const double expected = set_by_hand ? world_gbps : linked.tcp_gbps;
      for (ccl::Communicator* group : {&mesh->dp(), &mesh->dp_grads(), &mesh->tp(), &mesh->pp()}) {
        EXPECT_EQ(group->config().tcp_gbps, expected) << group->name();
        EXPECT_EQ(group->config().host_id, world->config().host_id) << "only the link model changes";
      }
      std::vector<float> data(1 << 18, static_cast<float>(mesh->rank() + 1));
      ccl::AllreduceOptions o;
      o.input = data.data();
      o.output = data.data();
      o.count = data.size();
      ccl::allreduce(mesh->dp(), o).wait();
      EXPECT_EQ(data.front(), 10.0f);
      EXPECT_EQ(data.back(), 10.0f);
      std::lock_guard lock(mutex);
      notes.push_back(note);
    });
    for (const std::string& note : notes) {
      if (set_by_hand) EXPECT_EQ(note, "");
      else EXPECT_NE(note.find("ccl chooses its algorithms on the cluster's links: TCP 10 Mbit/s"), std::string::npos)
          << note;
    }
  }
}

}  // namespace
}  // namespace giant::train
