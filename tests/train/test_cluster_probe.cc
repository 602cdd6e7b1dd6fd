// parallel.auto without a cluster file: the cluster measured on the run's
// ranks (ranks as threads here, two "hosts" told apart by their host ids;
// end to end on an emulated cluster in test_auto_cluster.cc): every rank
// gets the same cluster, in the time budget, of the shape the ranks make,
// and hosts of different sizes are refused by name.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/planner/spec_toml.h"
#include "giant/train/cluster_probe.h"
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

}  // namespace
}  // namespace giant::train
