// `giant launch` end to end: the CLI program starts real ranks (shell
// commands, and a ccl program running allreduces), and the tests fail ranks,
// signal the launcher, and check its output, exit status and that no process
// is left behind.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "launch/support/launch_cli.h"
#include "launch/support/launch_runner.h"
#include "launch/support/test_namespace.h"

namespace giant::launch::test {
namespace {

constexpr const char* kRankProgram = GIANT_LAUNCH_TEST_RANK;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<std::string> sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

// Rank pids (pid.R) and the pids of the sleeps they started (child.R).
std::vector<pid_t> recorded_pids(const std::string& dir, int nproc, bool children) {
  std::vector<pid_t> pids;
  for (int r = 0; r < nproc; ++r) {
    pids.push_back(read_pid(dir + "/pid." + std::to_string(r)));
    if (children) pids.push_back(read_pid(dir + "/child." + std::to_string(r)));
  }
  return pids;
}

// A rank that records its pid and that of a sleep it starts, then waits.
// Files are written under a temporary name and renamed, so a reader never
// sees half a pid. $D is the directory.
const char* kSleeper =
    "sleep 30 & echo $! > $D/child.$GIANT_RANK.tmp; mv $D/child.$GIANT_RANK.tmp $D/child.$GIANT_RANK; "
    "echo $$ > $D/pid.$GIANT_RANK.tmp; mv $D/pid.$GIANT_RANK.tmp $D/pid.$GIANT_RANK; ";

TEST(Launch, EveryRankPrintsItsRankPrefixedAndGetsTheLaunchVariables) {
  LaunchProcess launch(kCli,
                       concat({"--nproc", "3", "--"},
                              sh("echo \"$GIANT_RANK/$GIANT_WORLD_SIZE\"; "
                                 "echo \"local $GIANT_LOCAL_RANK/$GIANT_LOCAL_WORLD_SIZE store $GIANT_STORE_ADDR "
                                 "secret=${GIANT_SECRET:-none} mode $(stat -c %a \"$GIANT_SECRET_FILE\") "
                                 "file $GIANT_SECRET_FILE host=${GIANT_HOST_ID:-unset}\" >&2")),
                       {"GIANT_SECRET=from-the-parent"});
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value()) << "the launch did not end in 20 s";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << launch.err();
  auto out = lines_of(launch.out());
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[rank 0] 0/3", "[rank 1] 1/3", "[rank 2] 2/3"})) << launch.out();

  auto err = lines_of(launch.err());
  ASSERT_EQ(err.size(), 4u) << launch.err();
  EXPECT_EQ(err[0].rfind("giant launch: 3 ranks on local:3, store at 127.0.0.1:", 0), 0u) << err[0];
  std::string secret_file;
  for (int r = 0; r < 3; ++r) {
    std::string prefix = "[rank " + std::to_string(r) + "] local " + std::to_string(r) + "/3 store 127.0.0.1:";
    auto line = std::find_if(err.begin(), err.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
    ASSERT_NE(line, err.end()) << "no line from rank " << r << " in\n" << launch.err();
    // The parent's GIANT_SECRET is not passed on; the file is private.
    EXPECT_NE(line->find(" secret=none mode 600 file /"), std::string::npos) << *line;
    EXPECT_NE(line->find("host=unset"), std::string::npos) << *line;
    secret_file = line->substr(line->find(" file ") + 6, line->find(" host=") - line->find(" file ") - 6);
  }
  EXPECT_FALSE(secret_file.empty());
  EXPECT_EQ(::access(secret_file.c_str(), F_OK), -1) << secret_file << " was not removed at exit";
}

TEST(Launch, AFailedRankStopsTheOthersAndSetsTheExitStatus) {
  auto start = Clock::now();
  LaunchProcess launch(
      kCli, concat({"--nproc", "3", "--"},
                   sh(std::string(kSleeper) +
                      "if [ $GIANT_RANK = 1 ]; then while [ ! -e $D/pid.2 ] || [ ! -e $D/pid.0 ]; do sleep 0.01; done; "
                      "echo 'rank one fails'; exit 3; fi; wait")));
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value()) << "the launch did not end in 20 s\n" << launch.err();
  EXPECT_LT(seconds_since(start), 5.0) << "the sleeping ranks should be stopped by SIGTERM at once";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << "status " << *status << "\n" << launch.err();
  std::string err = launch.err();
  EXPECT_NE(err.find("giant launch: rank 1 exited with code 3; stopping the other ranks\n"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 1 (local, pid "), std::string::npos) << err;
  EXPECT_NE(err.find("exited with code 3  <- first to fail"), std::string::npos) << err;
  EXPECT_NE(err.find("was killed by signal 15 (SIGTERM) (the launcher sent it SIGTERM)"), std::string::npos) << err;
  EXPECT_NE(err.find("giant launch: exit status 3, from rank 1"), std::string::npos) << err;
  EXPECT_NE(launch.out().find("[rank 1] rank one fails\n"), std::string::npos) << launch.out();
  auto pids = recorded_pids(launch.dir(), 3, true);
  EXPECT_EQ(std::count(pids.begin(), pids.end(), -1), 0) << "every rank should have written its pids";
  EXPECT_TRUE(alive_after(pids, 2).empty()) << "processes left behind";
}

TEST(Launch, ARankKilledDuringAllreducesEndsTheLaunchNamingIt) {
  constexpr double kCclTimeout = 5;  // GIANT_CCL_TIMEOUT below
  LaunchProcess launch(kCli, concat({"--nproc", "3", "--"}, sh(std::string("exec ") + kRankProgram + " \"$D\" 0")),
                       {"GIANT_CCL_TIMEOUT=5s"});
  ASSERT_TRUE(wait_for_files(launch.dir(), {"pid.0", "pid.1", "pid.2"}, 30)) << launch.err();
  ASSERT_TRUE(wait_for_text(launch.dir() + "/launch.out", "[rank 2] iteration 20 ok", 30)) << launch.out() << launch.err();
  auto pids = recorded_pids(launch.dir(), 3, false);
  auto start = Clock::now();
  ASSERT_EQ(::kill(pids[1], SIGKILL), 0);
  auto status = launch.wait(4 * kCclTimeout);
  ASSERT_TRUE(status.has_value()) << "the launch did not end\n" << launch.err();
  double seconds = seconds_since(start);
  std::printf("the launch ended %.3f s after rank 1 was killed\n", seconds);
  EXPECT_LT(seconds, 2 * kCclTimeout);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGKILL) << *status << "\n" << launch.err();
  std::string err = launch.err();
  EXPECT_NE(err.find("giant launch: rank 1 was killed by signal 9 (SIGKILL); stopping the other ranks\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("giant launch: exit status 137, from rank 1"), std::string::npos) << err;
  EXPECT_TRUE(alive_after(pids, 2).empty()) << "processes left behind";
}

TEST(Launch, SigtermToTheLauncherIsForwardedToEveryRank) {
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--"}, sh(std::string(kSleeper) + "wait")));
  ASSERT_TRUE(wait_for_files(launch.dir(), {"pid.0", "pid.1", "child.0", "child.1"}, 20)) << launch.err();
  auto pids = recorded_pids(launch.dir(), 2, true);
  auto start = Clock::now();
  ASSERT_EQ(::kill(launch.pid(), SIGTERM), 0);
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value()) << launch.err();
  EXPECT_LT(seconds_since(start), 4.0);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGTERM) << *status << "\n" << launch.err();
  std::string err = launch.err();
  EXPECT_NE(err.find("giant launch: got SIGTERM; passing it to the ranks"), std::string::npos) << err;
  EXPECT_NE(err.find("exit status 143, stopped by SIGTERM"), std::string::npos) << err;
  EXPECT_TRUE(alive_after(pids, 2).empty()) << "processes left behind";
}

TEST(Launch, ARankThatIgnoresSigtermIsKilledAfterTheGrace) {
  auto start = Clock::now();
  LaunchProcess launch(
      kCli, concat({"--nproc", "2", "--timeout-grace", "0.5s", "--"},
                   sh("trap '' TERM; " + std::string(kSleeper) +
                      "if [ $GIANT_RANK = 1 ]; then while [ ! -e $D/pid.0 ]; do sleep 0.01; done; exit 5; fi; "
                      "while true; do sleep 0.05; done")));
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value()) << launch.err();
  EXPECT_LT(seconds_since(start), 4.0);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 5) << *status << "\n" << launch.err();
  std::string err = launch.err();
  EXPECT_NE(err.find("rank(s) 0 still running 500 ms after being asked to stop; killing them (SIGKILL)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("rank 0 (local, pid "), std::string::npos) << err;
  EXPECT_NE(err.find("was killed by signal 9 (SIGKILL) (the launcher sent it SIGTERM, then SIGKILL)"), std::string::npos) << err;
  EXPECT_TRUE(alive_after(recorded_pids(launch.dir(), 2, true), 2).empty()) << "processes left behind";
}

// A rank stopped by SIGSTOP takes no SIGTERM until it runs again: the
// launcher wakes it, so it ends at once instead of after the (long) grace.
TEST(Launch, AStoppedRankIsWokenToEndWithoutWaitingOutTheGrace) {
  auto start = Clock::now();
  LaunchProcess launch(
      kCli, concat({"--nproc", "2", "--timeout-grace", "60", "--"},
                   sh(std::string(kSleeper) +
                      // Rank 1 fails once rank 0's shell is stopped (state T).
                      "if [ $GIANT_RANK = 1 ]; then while [ ! -e $D/pid.0 ] || "
                      "[ \"$(cut -d' ' -f3 /proc/$(cat $D/pid.0)/stat)\" != T ]; do sleep 0.01; done; exit 6; fi; "
                      "kill -STOP $$; wait")));
  auto status = launch.wait(30);
  ASSERT_TRUE(status.has_value()) << "the launch did not end in 30 s\n" << launch.err();
  EXPECT_LT(seconds_since(start), 10.0) << "the stopped rank waited out the grace\n" << launch.err();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 6) << *status << "\n" << launch.err();
  EXPECT_NE(launch.err().find("was killed by signal 15 (SIGTERM) (the launcher sent it SIGTERM)"), std::string::npos)
      << launch.err();
  EXPECT_TRUE(alive_after(recorded_pids(launch.dir(), 2, true), 2).empty()) << "processes left behind";
}

TEST(Launch, ASecondSignalKillsTheRanksAtOnce) {
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--timeout-grace", "60", "--"},
                                    sh("trap '' INT TERM; " + std::string(kSleeper) + "while true; do sleep 0.05; done")));
  ASSERT_TRUE(wait_for_files(launch.dir(), {"pid.0", "pid.1"}, 20)) << launch.err();
  auto start = Clock::now();
  ASSERT_EQ(::kill(launch.pid(), SIGINT), 0);
  ASSERT_TRUE(wait_for_text(launch.dir() + "/launch.err", "got SIGINT; passing it to the ranks", 10)) << launch.err();
  ASSERT_EQ(::kill(launch.pid(), SIGINT), 0);
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value()) << launch.err();
  EXPECT_LT(seconds_since(start), 5.0) << "the second SIGINT should not wait for the 60 s grace";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGINT) << *status << "\n" << launch.err();
  EXPECT_NE(launch.err().find("got SIGINT while stopping the ranks; killing them (SIGKILL)"), std::string::npos)
      << launch.err();
  EXPECT_TRUE(alive_after(recorded_pids(launch.dir(), 2, true), 2).empty()) << "processes left behind";
}

TEST(Launch, LinesOfRanksNeverMixAndPartialLinesAreKept) {
  // Each rank writes 200 lines of 2000 digits, each in two writes, on both
  // streams at once, then a last line without '\n'.
  LaunchProcess launch(kCli, concat({"--nproc", "3", "--"},
                                    sh("half=$(printf '%01000d' 0 | tr 0 $GIANT_RANK); i=0; "
                                       "while [ $i -lt 200 ]; do printf %s $half; printf '%s\\n' $half; "
                                       "printf %s $half >&2; printf '%s\\n' $half >&2; i=$((i+1)); done; "
                                       "printf 'no newline'; printf 'x' >&2; sleep 0.05; printf 'y' >&2")));
  auto status = launch.wait(30);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << launch.err().substr(0, 2000);
  for (const std::string& stream : {launch.out(), launch.err()}) {
    int counts[3] = {0, 0, 0};
    int tails = 0;
    for (const std::string& line : lines_of(stream)) {
      if (line.rfind("giant launch: ", 0) == 0) continue;
      ASSERT_EQ(line.rfind("[rank ", 0), 0u) << line.substr(0, 80);
      int rank = line[6] - '0';
      ASSERT_TRUE(rank >= 0 && rank < 3) << line.substr(0, 80);
      std::string body = line.substr(9);
      if (body == "no newline" || body == "xy") {
        ++tails;
        continue;
      }
      ASSERT_EQ(body, std::string(2000, static_cast<char>('0' + rank))) << "a mixed line: " << line.substr(0, 80);
      ++counts[rank];
    }
    EXPECT_EQ(counts[0], 200);
    EXPECT_EQ(counts[1], 200);
    EXPECT_EQ(counts[2], 200);
    EXPECT_EQ(tails, 3) << "the partial last line of each rank";
  }
}

TEST(Launch, BadUsageExitsWithStatus2AndSaysWhy) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--nproc", "2"}, "no command to run"},
      {{"--nproc", "2", "--"}, "no command to run"},
      {{"--", "true"}, "--nproc N (or --hosts SPEC) is required (or --emulate HxR)"},
      {{"--nproc", "0", "--", "true"}, "--nproc: must be at least 1, got 0"},
      {{"--nproc", "two", "--", "true"}, "--nproc: expects an integer, got 'two'"},
      {{"--nproc", "2", "--hosts", "local:x", "--", "true"}, "SLOTS must be a positive integer"},
      {{"--hosts", "node7:2", "--", "true"}, "remote hosts (ssh) are out of its scope"},
      {{"--hosts", "ssh:node7:2", "--", "true"}, "remote hosts (ssh) are out of its scope"},
      {{"--nproc", "3", "--hosts", "local:2", "--", "true"}, "--nproc is 3 but --hosts 'local:2' has 2 slots"},
      {{"--hosts", "netns:giant-launch-test-none:1", "--", "true"}, "give --store-addr ADDR"},
      {{"--hosts", "netns:giant-launch-test-none:1", "--store-addr", "10.0.0.1", "--", "true"},
       "network namespace 'giant-launch-test-none' does not exist"},
      {{"--nproc", "1", "--store-addr", "a:b:c", "--", "true"}, "expected HOST or HOST:PORT"},
      {{"--nproc", "1", "--frobnicate", "--", "true"}, "unknown flag '--frobnicate'"},
      {{"--nproc", "1", "-x", "true"}, "unknown flag '-x'"},
      {{"--nproc"}, "--nproc"},
      {{"--nproc", "1", "--hosts"}, "--hosts"},
      {{"--nproc", "1", "--timeout-grace", "soon", "--", "true"}, "--timeout-grace: expects a duration"},
      {{"--nproc", "1", "--", "giant-launch-no-such-program"}, "'giant-launch-no-such-program' is not an executable"},
  };
  for (const Case& c : cases) {
    LaunchProcess launch(kCli, c.args);
    auto status = launch.wait(10);
    ASSERT_TRUE(status.has_value());
    std::string err = launch.err();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << c.says << ": status " << *status << "\n" << err;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
    EXPECT_NE(err.find("usage: giant launch --nproc N"), std::string::npos) << err;
  }
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"}, {"--nproc", "2", "-h"}}) {
    const std::string& flag = args.back();
    LaunchProcess help(kCli, args);
    auto status = help.wait(10);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << flag << ": " << *status;
    for (const char* says : {"Usage: giant launch [OPTIONS] [--] COMMAND [ARGS...]\n", "--nproc", "--hosts", "--store-addr", "--timeout-grace",
                             "GIANT_SECRET_FILE", "--max-restarts", "--restart-backoff", "Exit status: 0 when every rank exits 0"}) {
      EXPECT_NE(help.out().find(says), std::string::npos) << flag << " does not say " << says << ":\n" << help.out();
    }
    EXPECT_TRUE(help.err().empty()) << help.err();
  }
}

TEST(Launch, TheCommandStartsAtTheFirstArgumentThatIsNoFlagAndKeepsItsOwnFlags) {
  // A repeated flag keeps its last value; the command's own --nproc and -c
  // are its arguments, not the launcher's.
  LaunchProcess launch(kCli, {"--nproc", "5", "--nproc=2", "/bin/sh", "-c", "echo \"$GIANT_WORLD_SIZE $1\"", "sh",
                              "--nproc"});
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status << "\n" << launch.err();
  auto out = lines_of(launch.out());
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[rank 0] 2 --nproc", "[rank 1] 2 --nproc"})) << launch.out();
}

TEST(Launch, ALauncherThatCannotServeTheStoreExitsWithStatus1) {
  // A port already taken: the failure is the launcher's own, at run time.
  int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t size = sizeof address;
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const std::string port = std::to_string(ntohs(address.sin_port));
  LaunchProcess launch(kCli, {"--nproc", "1", "--store-addr", "127.0.0.1:" + port, "--", "true"});
  auto status = launch.wait(20);
  ::close(taken);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << *status << "\n" << launch.err();
  EXPECT_EQ(launch.err().rfind("giant launch: ", 0), 0u) << launch.err();
  EXPECT_EQ(launch.err().find("usage:"), std::string::npos) << "not a usage error: " << launch.err();
}

std::string netns_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "?";
  return "net:[" + std::to_string(info.st_ino) + "]";
}

TEST(Launch, NetnsHostsRunRanksInTheirNamespacesWithTheirOwnHostIds) {
  TestNamespace ns;
  ASSERT_TRUE(ns.error().empty()) << "this test needs to create a network namespace (root and iproute2): "
                                  << ns.error();
  const std::string hosts = "local:1,netns:" + ns.name() + ":2";
  const std::string here = netns_of("/proc/self/ns/net");
  const std::string there = netns_of("/run/netns/" + ns.name());
  ASSERT_NE(here, there);

  LaunchProcess where(kCli, concat({"--hosts", hosts, "--store-addr", ns.host_address(), "--"},
                                   sh("echo \"$GIANT_HOST_ID $GIANT_LOCAL_RANK/$GIANT_LOCAL_WORLD_SIZE "
                                      "$(readlink /proc/self/ns/net) $GIANT_STORE_ADDR\"")));
  auto status = where.wait(20);
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << where.out() << where.err();
  auto lines = lines_of(where.out());
  std::sort(lines.begin(), lines.end());
  ASSERT_EQ(lines.size(), 3u) << where.out();
  const std::string store = " " + ns.host_address() + ":";
  EXPECT_EQ(lines[0].rfind("[rank 0] local 0/1 " + here + store, 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("[rank 1] netns:" + ns.name() + " 0/2 " + there + store, 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("[rank 2] netns:" + ns.name() + " 1/2 " + there + store, 0), 0u) << lines[2];

  // ccl across the namespace boundary, through the launcher's store.
  LaunchProcess ccl(kCli,
                    concat({"--hosts", hosts, "--store-addr", ns.host_address(), "--"},
                           sh(std::string("exec ") + kRankProgram + " \"$D\" 40")),
                    {"GIANT_CCL_TIMEOUT=10s"});
  status = ccl.wait(40);
  ASSERT_TRUE(status.has_value()) << ccl.out() << ccl.err();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << ccl.out() << ccl.err();
  std::string out = ccl.out();
  EXPECT_NE(out.find("[rank 0] rank 0 of 3 ready, host id 'local', 2 host(s)"), std::string::npos) << out;
  for (int r = 1; r < 3; ++r) {
    std::string r_text = std::to_string(r);
    EXPECT_NE(out.find("[rank " + r_text + "] rank " + r_text + " of 3 ready, host id 'netns:" + ns.name() +
                       "', 2 host(s)"),
              std::string::npos)
        << out;
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(out.find("[rank " + std::to_string(r) + "] done sum=6"), std::string::npos) << out << ccl.err();
  }
}

}  // namespace
}  // namespace giant::launch::test
