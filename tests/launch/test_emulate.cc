// `giant launch --emulate HxR --link-rate RATE` end to end (as root, as CI
// runs): ranks run on hosts of their own joined through a capped bridge, and
// every namespace and link is gone after a run that succeeded, lost a rank,
// or was interrupted, and after the next run when the launcher was SIGKILLed.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "launch/support/launch_cli.h"
#include "launch/support/launch_runner.h"

namespace giant::launch::test {
namespace {

constexpr const char* kRankProgram = GIANT_LAUNCH_TEST_RANK;
constexpr const char* kDuplexRank = GIANT_LAUNCH_TEST_DUPLEX;

std::vector<std::string> sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

// A rank that records its pid (pid.R, renamed into place) and sleeps.
std::vector<std::string> sleeping_rank() {
  return sh("echo $$ > $D/pid.$GIANT_RANK.tmp; mv $D/pid.$GIANT_RANK.tmp $D/pid.$GIANT_RANK; exec sleep 30");
}

// What launcher `pid` made that still exists: its namespaces and its uplink.
std::vector<std::string> left_by(pid_t pid) {
  std::vector<std::string> left;
  const std::string prefix = "giant-emu-" + std::to_string(pid) + "-";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) left.push_back(name);
  }
  const std::string uplink = "gemu" + std::to_string(pid);
  if (std::filesystem::exists("/sys/class/net/" + uplink)) left.push_back(uplink);
  return left;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : " ") + name;
  return text;
}

void expect_nothing_left_by(pid_t pid) { EXPECT_TRUE(left_by(pid).empty()) << "left behind: " << joined(left_by(pid)); }

int exit_code(const std::optional<int>& status) {
  return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

TEST(Emulate, RanksRunOnHostsOfTheirOwnAndTheClusterGoesAfterwards) {
  ASSERT_EQ(::geteuid(), 0u) << "--emulate needs root (CI runs as root)";
  LaunchProcess where(kCli, concat({"--emulate", "2x2", "--link-rate", "200mbit", "--"},
                                   sh("echo \"$GIANT_HOST_ID $GIANT_LOCAL_RANK/$GIANT_LOCAL_WORLD_SIZE "
                                      "$(readlink /proc/self/ns/net)\"")));
  auto status = where.wait(30);
  ASSERT_EQ(exit_code(status), 0) << where.out() << where.err();
  expect_nothing_left_by(where.pid());
  EXPECT_NE(where.err().find("emulating 2 hosts of 2 ranks"), std::string::npos) << where.err();
  EXPECT_NE(where.err().find("capped at 200 Mbit/s each way"), std::string::npos) << where.err();
  auto lines = lines_of(where.out());
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines.size(), 4u) << where.out();
  std::set<std::string> namespaces;
  for (int r = 0; r < 4; ++r) {
    const std::string host = "netns:giant-emu-" + std::to_string(where.pid()) + "-" + std::to_string(r / 2);
    const std::string expected = "[rank " + std::to_string(r) + "] " + host + " " + std::to_string(r % 2) + "/2 net:";
    EXPECT_EQ(lines[r].rfind(expected, 0), 0u) << lines[r];
    namespaces.insert(lines[r].substr(lines[r].find("net:")));
  }
  EXPECT_EQ(namespaces.size(), 2u) << where.out();  // two hosts, two ranks in each

  // ccl between the emulated hosts, through the launcher's store.
  LaunchProcess ccl(kCli, concat({"--emulate", "2x2", "--link-rate", "200mbit", "--"},
                                 sh(std::string("exec ") + kRankProgram + " \"$D\" 20")),
                    {"GIANT_CCL_TIMEOUT=20s"});
  status = ccl.wait(60);
  ASSERT_EQ(exit_code(status), 0) << ccl.out() << ccl.err();
  const std::string out = ccl.out();
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(out.find("[rank " + std::to_string(r) + "] done sum=10"), std::string::npos) << out;
  }
  EXPECT_NE(out.find("2 host(s)"), std::string::npos) << out;
  expect_nothing_left_by(ccl.pid());
}

// A host that sends and receives at once (the middle of a chain: a ring's
// ranks, a pipeline's middle stages) keeps its link's rate both ways: the
// acknowledgements of what it receives do not wait behind what it sends.
// In one FIFO per link end the middle host received at 71-81% of the cap.
TEST(Emulate, AHostThatSendsAndReceivesAtOnceKeepsItsLinkBothWays) {
  ASSERT_EQ(::geteuid(), 0u) << "--emulate needs root (CI runs as root)";
  constexpr double kCap = 20e6;
  LaunchProcess chain(kCli, concat({"--emulate", "3x1", "--link-rate", "20mbit", "--", "/usr/bin/python3", kDuplexRank,
                                    "4000000"}, {}));
  const auto status = chain.wait(60);
  ASSERT_EQ(exit_code(status), 0) << chain.out() << chain.err();
  expect_nothing_left_by(chain.pid());
  for (int r = 1; r < 3; ++r) {
    const std::string key = "[rank " + std::to_string(r) + "] received_bits_per_s=";
    const auto at = chain.out().find(key);
    ASSERT_NE(at, std::string::npos) << chain.out();
    const double rate = std::stod(chain.out().substr(at + key.size()));
    EXPECT_GE(rate, 0.88 * kCap) << "rank " << r << " received at " << rate / kCap * 100 << "% of the cap\n"
                                 << chain.out();
    EXPECT_LE(rate, 1.02 * kCap) << "rank " << r;
  }
}

TEST(Emulate, TheClusterGoesWhenARankDies) {
  ASSERT_EQ(::geteuid(), 0u) << "--emulate needs root (CI runs as root)";
  LaunchProcess launch(kCli, concat({"--emulate", "2x1", "--"},
                                    sh("if [ \"$GIANT_RANK\" = 1 ]; then kill -9 $$; fi; exec sleep 30")));
  auto status = launch.wait(30);
  ASSERT_TRUE(status.has_value()) << launch.err();
  EXPECT_EQ(exit_code(status), 128 + SIGKILL) << launch.err();
  expect_nothing_left_by(launch.pid());
}

TEST(Emulate, TheClusterGoesWhenTheLaunchIsInterrupted) {
  ASSERT_EQ(::geteuid(), 0u) << "--emulate needs root (CI runs as root)";
  LaunchProcess launch(kCli, concat({"--emulate", "2x1", "--"},
                                    sleeping_rank()));
  ASSERT_TRUE(wait_for_files(launch.dir(), {"pid.0", "pid.1"}, 20)) << launch.err();
  EXPECT_EQ(left_by(launch.pid()).size(), 4u) << joined(left_by(launch.pid()));  // 2 hosts, the switch, the uplink
  ASSERT_EQ(::kill(launch.pid(), SIGINT), 0);
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value()) << launch.err();
  EXPECT_EQ(exit_code(status), 128 + SIGINT) << launch.err();
  expect_nothing_left_by(launch.pid());
}

TEST(Emulate, ASigkilledLaunchersClusterIsRemovedByTheNextRun) {
  ASSERT_EQ(::geteuid(), 0u) << "--emulate needs root (CI runs as root)";
  LaunchProcess killed(kCli, concat({"--emulate", "2x1", "--"},
                                    sleeping_rank()));
  ASSERT_TRUE(wait_for_files(killed.dir(), {"pid.0", "pid.1"}, 20)) << killed.err();
  ASSERT_EQ(::kill(killed.pid(), SIGKILL), 0);
  ASSERT_TRUE(killed.wait(10).has_value());
  const std::vector<pid_t> ranks = {read_pid(killed.dir() + "/pid.0"), read_pid(killed.dir() + "/pid.1")};
  EXPECT_TRUE(alive_after(ranks, 5).empty()) << "the ranks outlived their launcher";
  EXPECT_FALSE(left_by(killed.pid()).empty()) << "a SIGKILLed launcher cannot remove its cluster";

  LaunchProcess next(kCli, concat({"--emulate", "1x1", "--"}, sh("true")));
  ASSERT_EQ(exit_code(next.wait(30)), 0) << next.err();
  expect_nothing_left_by(killed.pid());
  expect_nothing_left_by(next.pid());
}

// Bad flags exit 2 before anything is made, naming the flag.
TEST(Emulate, BadFlagsExitWithStatus2NamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--emulate", "2y2"}, "'--emulate': expected HOSTSxRANKS"},
      {{"--emulate", "0x2"}, "'--emulate': the number of hosts must be"},
      {{"--emulate", "2x"}, "'--emulate': the number of ranks per host must be"},
      {{"--emulate", "2x2", "--link-rate", "5MB/s"}, "'--link-rate': unknown rate unit"},
      {{"--emulate", "2x2", "--link-rate", "0mbit"}, "'--link-rate': a link rate must be positive"},
      {{"--nproc", "2", "--link-rate", "5mbit"}, "--link-rate caps an emulated cluster's links"},
      {{"--emulate", "2x2", "--nproc", "3"}, "'--nproc': --nproc is 3 but --emulate 2x2 runs 4 ranks"},
      {{"--emulate", "2x2", "--hosts", "local:4"}, "'--emulate': give --emulate or --hosts, not both"},
      {{"--emulate", "2x2", "--store-addr", "10.0.0.1"}, "'--store-addr': --emulate serves the store"},
  };
  for (const auto& [flags, message] : cases) {
    LaunchProcess launch(kCli, concat(flags, {"--", "true"}));
    auto status = launch.wait(20);
    EXPECT_EQ(exit_code(status), 2) << joined(flags) << "\n" << launch.err();
    EXPECT_NE(launch.err().find(message), std::string::npos) << joined(flags) << "\n" << launch.err();
    expect_nothing_left_by(launch.pid());
  }
}

TEST(Emulate, WithoutRootExitsWithStatus2SayingWhatItNeeds) {
  ASSERT_EQ(::geteuid(), 0u) << "this test drops root to check the refusal (CI runs as root)";
  ASSERT_EQ(shell("command -v setpriv > /dev/null"), 0) << "needs util-linux's setpriv";
  // A copy the unprivileged user can run wherever the build tree is (a
  // checkout under /root is not reachable for it).
  char pattern[] = "/tmp/giant-emulate-nonroot-XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  const std::string cli = dir + "/giant_launch_cli";
  ASSERT_EQ(shell("cp '" + std::string(kCli) + "' '" + cli + "' && chmod 0755 '" + dir + "' '" + cli + "'"), 0);
  LaunchProcess launch("/usr/bin/setpriv", concat({"--reuid=65534", "--regid=65534", "--clear-groups", cli,
                                                   "--emulate", "2x1", "--"},
                                                  {"true"}));
  auto status = launch.wait(20);
  EXPECT_EQ(exit_code(status), 2) << launch.err();
  EXPECT_NE(launch.err().find("'--emulate': --emulate needs root to create network namespaces (running as uid 65534)"),
            std::string::npos)
      << launch.err();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace giant::launch::test
