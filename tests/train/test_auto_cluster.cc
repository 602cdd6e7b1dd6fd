// parallel.auto with no cluster file on an emulated cluster (giant launch
// --emulate 2x2, each host's link capped at 100 Mbit/s, as root like CI):
// giant train measures the cluster within its budget, writes it where
// `giant plan --cluster` reads it, and picks a layout whose tensor-parallel
// groups stay inside a host.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "giant/planner/spec_toml.h"
#include "train/support/launch_support.h"
#include "train/support/train_test_support.h"

namespace giant::train {
namespace {

const std::string kData = std::string(GIANT_SOURCE_DIR) + "/examples/data/kjv.txt";

TEST(AutoCluster, TheMeasuredClusterKeepsTensorParallelGroupsInsideAHost) {
  ASSERT_EQ(::geteuid(), 0u) << "giant launch --emulate needs root (CI runs as root)";
  const test::TempDir dir("giant-auto-cluster");
  const std::string out = dir.path() + "/out";
  const std::string args =
      "--set parallel.auto=true --set model.layers=4 --set model.hidden=128 --set model.heads=4 "
      "--set model.seq_len=64 --set train.global_batch=8 --set train.steps=2 --set train.threads=1 "
      "--set train.precision=fp32 --set train.eval_every=0 --set train.eval_batches=1 --set train.sample_tokens=0 "
      "--set ccl.timeout=60s --set data.path=\\\"" + kData + "\\\" --set train.out_dir=\\\"" + out + "\\\"";
  const std::string log = dir.path() + "/train.log";
  const int status = test::run_train(args, log, test::giant_binary() + " launch --emulate 2x2 --link-rate 100mbit -- ");
  const std::string text = test::read_file(log);
  ASSERT_EQ(status, 0) << text;

  std::smatch measured;
  ASSERT_TRUE(std::regex_search(text, measured, std::regex(R"(measured the cluster in ([0-9.]+) s: 2 host\(s\) x 2 rank\(s\))")))
      << text;
  EXPECT_LE(std::stod(measured[1]), 20.0) << "the probes' budget is 20 s";
  std::smatch chosen;
  ASSERT_TRUE(std::regex_search(text, chosen, std::regex(R"(parallel.auto: dp=(\d+) pp=(\d+) tp=(\d+))"))) << text;
  // Ranks are numbered host by host and tp is the fastest axis: groups of
  // at most a host's 2 ranks are inside a host.
  EXPECT_LE(std::stoi(chosen[3]), 2) << chosen[0];
  // ccl's groups then choose their algorithms on the measured links.
  EXPECT_NE(text.find("ccl chooses its algorithms on the cluster's links: TCP "), std::string::npos) << text;
  EXPECT_NE(text.find("giant train: done: 2 steps"), std::string::npos) << text;

  const planner::ClusterSpec cluster = planner::load_cluster_toml(out + "/cluster.toml");
  EXPECT_EQ(cluster.hosts, 2);
  EXPECT_EQ(cluster.devices_per_host, 2);
  // 100 Mbit/s each way is 12.5 MB/s: no allreduce between hosts beats it.
  EXPECT_LT(cluster.inter_host.bandwidth_bytes_per_s, 12.5e6 * 1.05);
  EXPECT_GT(cluster.intra_host.bandwidth_bytes_per_s, 10 * cluster.inter_host.bandwidth_bytes_per_s);
}

// Runs `giant plan --calibrate` on an emulated cluster of `hosts` hosts of
// one rank, each link capped at `rate`; returns the cluster it wrote and
// its log.
planner::ClusterSpec calibrate_under_launcher(const test::TempDir& dir, int hosts, const std::string& rate,
                                              std::string& text) {
  const std::string file = dir.path() + "/cluster.toml", log = dir.path() + "/plan.log";
  const std::string command = test::giant_binary() + " launch --emulate " + std::to_string(hosts) +
                              "x1 --link-rate " + rate + " -- " + test::giant_binary() + " plan --calibrate --out " +
                              file + " > " + log + " 2>&1";
  const int status = std::system(command.c_str());
  text = test::read_file(log);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  return planner::load_cluster_toml(file);
}

// giant plan --calibrate under the launcher measures the same way, and its
// file is one giant plan reads.
TEST(AutoCluster, PlanCalibrateUnderALauncherMeasuresTheLaunchedCluster) {
  ASSERT_EQ(::geteuid(), 0u) << "giant launch --emulate needs root (CI runs as root)";
  const test::TempDir dir("giant-plan-calibrate");
  std::string text;
  const planner::ClusterSpec cluster = calibrate_under_launcher(dir, 2, "200mbit", text);
  EXPECT_NE(text.find("[rank 0] giant plan: measured the cluster in "), std::string::npos) << text;
  EXPECT_EQ(cluster.hosts, 2);
  EXPECT_EQ(cluster.devices_per_host, 1);
  EXPECT_LT(cluster.inter_host.bandwidth_bytes_per_s, 25e6 * 1.05);  // 200 Mbit/s
  const std::string log = dir.path() + "/plan.log";
  const int plan = std::system((test::giant_binary() + " plan --model gpt-125m --cluster " + dir.path() +
                                "/cluster.toml > " + log + " 2>&1").c_str());
  EXPECT_TRUE(WIFEXITED(plan) && WEXITSTATUS(plan) == 0) << test::read_file(log);
}

// A link so slow that a megabyte takes seconds is timed on what it moves
// in the probe's share of the budget, and at its rate: neither the budget
// overrun by a fixed message size nor the rate overstated by a burst.
TEST(AutoCluster, ASlowLinkIsMeasuredAtItsRateWithinTheBudget) {
  ASSERT_EQ(::geteuid(), 0u) << "giant launch --emulate needs root (CI runs as root)";
  const test::TempDir dir("giant-plan-calibrate-slow");
  std::string text;
  const planner::ClusterSpec cluster = calibrate_under_launcher(dir, 2, "2mbit", text);
  std::smatch measured;
  ASSERT_TRUE(std::regex_search(text, measured, std::regex(R"(measured the cluster in ([0-9.]+) s)"))) << text;
  EXPECT_LE(std::stod(measured[1]), 20.0) << "the probes' budget is 20 s";
  // 2 Mbit/s each way is 250 kB/s; TCP's headers and acknowledgements keep
  // a few percent of it.
  EXPECT_LT(cluster.inter_host.bandwidth_bytes_per_s, 250e3 * 1.02) << text;
  EXPECT_GT(cluster.inter_host.bandwidth_bytes_per_s, 250e3 * 0.8) << text;
}

}  // namespace
}  // namespace giant::train
