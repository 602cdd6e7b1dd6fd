// `giant launch` killed with SIGKILL (it cannot stop its ranks itself): its
// ranks, quiet ones included, and what they started must end within about a
// second, here, through a shell, and in a network namespace.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "launch/support/launch_cli.h"
#include "launch/support/launch_runner.h"
#include "launch/support/test_namespace.h"

namespace giant::launch::test {
namespace {

// The ranks must be gone within about a second; the bound leaves room for a
// loaded machine, and the wait ends as soon as they are.
constexpr double kBoundSeconds = 3.0;

using Clock = std::chrono::steady_clock;

// A silent rank: records its pid (pid.R), that of a sleep it starts
// (child.R) and its secret file's path (secret.R), then waits, with its
// output going nowhere. Files are renamed into place, so a reader never sees
// half a pid.
std::vector<std::string> quiet_shell_rank() {
  return {"/bin/sh", "-c",
          "exec >/dev/null 2>&1; sleep 60 & echo $! > $D/child.$GIANT_RANK.tmp; "
          "mv $D/child.$GIANT_RANK.tmp $D/child.$GIANT_RANK; "
          "echo $GIANT_SECRET_FILE > $D/secret.$GIANT_RANK; "
          "echo $$ > $D/pid.$GIANT_RANK.tmp; mv $D/pid.$GIANT_RANK.tmp $D/pid.$GIANT_RANK; wait"};
}

std::vector<pid_t> recorded_pids(const std::string& dir, int nproc) {
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    pids.push_back(read_pid(dir + "/pid." + std::to_string(r)));
    pids.push_back(read_pid(dir + "/child." + std::to_string(r)));
  }
  return pids;
}

std::string pid_list(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) text += (text.empty() ? "" : " ") + std::to_string(pid) + "(" + program_of(pid) + ")";
  return text;
}

// Waits for pids to be gone; true if they went within the bound. Says how
// long it took (what) or which are left, and kills those.
bool gone_within_bound(const std::vector<pid_t>& pids, Clock::time_point killed_at, const char* what) {
  const std::vector<pid_t> left = alive_after(pids, kBoundSeconds);
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  if (left.empty()) std::printf("%s gone %.3f s after the launcher was killed\n", what, seconds);
  EXPECT_TRUE(left.empty()) << what << " still running " << kBoundSeconds
                            << " s after the launcher was killed: " << pid_list(left);
  for (pid_t pid : left) ::kill(pid, SIGKILL);  // a failed test leaves nothing behind
  return left.empty();
}

// The launcher's other children and everything under them: its helpers.
// (The ranks' own subtrees hold short-lived processes, such as the shell's
// mv, that end by themselves.)
std::vector<pid_t> helpers_of(pid_t launcher, const std::vector<pid_t>& ranks) {
  std::vector<pid_t> helpers;
  for (pid_t child : children_of(launcher)) {
    if (std::find(ranks.begin(), ranks.end(), child) != ranks.end()) continue;
    helpers.push_back(child);
    for (pid_t below : descendants_of(child)) helpers.push_back(below);
  }
  return helpers;
}

// SIGKILLs the launcher and checks that the ranks (and what they started)
// and then its helpers are gone within the bound, and that the launcher's
// watcher said why.
void kill_launcher_and_expect_gone(LaunchProcess& launch, const std::vector<pid_t>& ranks) {
  ASSERT_EQ(std::count(ranks.begin(), ranks.end(), -1), 0) << "a rank did not record its pids";
  for (pid_t pid : ranks) ASSERT_TRUE(process_alive(pid)) << "pid " << pid << " ended before the launcher was killed";
  const std::vector<pid_t> helpers = helpers_of(launch.pid(), ranks);
  const auto killed_at = Clock::now();
  ASSERT_EQ(::kill(launch.pid(), SIGKILL), 0);
  EXPECT_TRUE(gone_within_bound(ranks, killed_at, "the ranks and what they started were")) << launch.err();
  EXPECT_TRUE(gone_within_bound(helpers, killed_at, "the launcher's helpers were")) << launch.err();
  auto status = launch.wait(10);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << *status;
  EXPECT_NE(launch.err().find("ended without stopping its ranks; killed them (SIGKILL)"), std::string::npos)
      << launch.err();
}

TEST(LaunchKilled, RanksRunDirectlyEndWithTheLauncher) {
  LaunchProcess launch(kCli, {"--nproc", "2", "--", "sleep", "60"});
  std::vector<pid_t> ranks;
  const auto start = Clock::now();
  while (ranks.size() < 2) {  // the launcher's children that run sleep
    ranks.clear();
    for (pid_t child : children_of(launch.pid())) {
      if (program_of(child) == "sleep") ranks.push_back(child);
    }
    ASSERT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 20.0)
        << "the ranks did not start\n" << launch.err();
    ::usleep(10 * 1000);
  }
  kill_launcher_and_expect_gone(launch, ranks);
}

TEST(LaunchKilled, RanksStartedThroughAShellEndWithWhatTheyStarted) {
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--"}, quiet_shell_rank()));
  ASSERT_TRUE(wait_for_files(launch.dir(), {"pid.0", "pid.1"}, 20)) << launch.err();
  std::string secret_file = read_file(launch.dir() + "/secret.0");
  secret_file = secret_file.substr(0, secret_file.find('\n'));
  ASSERT_FALSE(secret_file.empty());
  kill_launcher_and_expect_gone(launch, recorded_pids(launch.dir(), 2));
  EXPECT_EQ(::access(secret_file.c_str(), F_OK), -1) << secret_file << " was left behind";
  EXPECT_TRUE(launch.out().empty()) << launch.out();
}

TEST(LaunchKilled, RanksInNetworkNamespacesEndWithTheLauncher) {
  TestNamespace ns;
  ASSERT_TRUE(ns.error().empty()) << "this test needs to create a network namespace (root and iproute2): "
                                  << ns.error();
  LaunchProcess launch(kCli, concat({"--hosts", "local:1,netns:" + ns.name() + ":2", "--store-addr",
                                     ns.host_address(), "--"},
                                    quiet_shell_rank()));
  ASSERT_TRUE(wait_for_files(launch.dir(), {"pid.0", "pid.1", "pid.2"}, 20)) << launch.err();
  kill_launcher_and_expect_gone(launch, recorded_pids(launch.dir(), 3));
}

}  // namespace
}  // namespace giant::launch::test
