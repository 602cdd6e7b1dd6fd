// The parts of `giant launch`: the --hosts parser and rank placement, the
// line prefixer, exit-status wording, the secret file, the signal pipe, the
// lifeline's groups, and run_launch called in-process.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "giant/base/error.h"
#include "giant/launch/host_spec.h"
#include "giant/launch/launcher.h"
#include "giant/launch/lifeline.h"
#include "giant/launch/rank_output.h"
#include "giant/launch/rank_process.h"
#include "giant/launch/secret_file.h"
#include "giant/launch/signal_pipe.h"
#include "launch/support/launch_runner.h"

namespace giant::launch {
namespace {

TEST(HostSpec, ParsesLocalAndNetnsEntriesInOrder) {
  auto hosts = parse_host_spec("local:2,netns:blue:3,local:1");
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].kind, HostKind::local);
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[0].label, "local");
  EXPECT_EQ(hosts[1].kind, HostKind::netns);
  EXPECT_EQ(hosts[1].netns, "blue");
  EXPECT_EQ(hosts[1].slots, 3);
  EXPECT_EQ(hosts[1].label, "netns:blue");
  EXPECT_EQ(total_slots(hosts), 6);

  auto ranks = place_ranks(hosts);
  ASSERT_EQ(ranks.size(), 6u);
  const std::vector<std::string> ids = {"local", "local", "netns:blue", "netns:blue", "netns:blue", "local#1"};
  const std::vector<int> local_ranks = {0, 1, 0, 1, 2, 0};
  const std::vector<int> local_sizes = {2, 2, 3, 3, 3, 1};
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(ranks[r].rank, r);
    EXPECT_EQ(ranks[r].host_id, ids[r]) << r;
    EXPECT_EQ(ranks[r].local_rank, local_ranks[r]) << r;
    EXPECT_EQ(ranks[r].local_world_size, local_sizes[r]) << r;
  }
  EXPECT_EQ(ranks[5].host_index, 2);
}

TEST(HostSpec, RejectsBadSpecsNamingTheEntry) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "is empty"},
      {"local", "has no ':SLOTS'"},
      {"local:", "SLOTS must be a positive integer, got ''"},
      {"local:0", "SLOTS must be a positive integer, got '0'"},
      {"local:-1", "got '-1'"},
      {"local:2x", "got '2x'"},
      {"local:2,", "has an empty entry"},
      {",local:2", "has an empty entry"},
      {":2", "has no host"},
      {"netns::2", "'' is not a network namespace name"},
      {"netns:a/b:2", "'a/b' is not a network namespace name"},
      {"node7:2", "host 'node7' is not supported"},
      {"ssh:node7:2", "remote hosts (ssh) are out of its scope"},
      {"user@node7:2", "host 'user@node7' is not supported"},
  };
  for (const auto& [spec, says] : cases) {
    try {
      parse_host_spec(spec);
      ADD_FAILURE() << "'" << spec << "' was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "--hosts");
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << spec << ": " << e.what();
    }
  }
}

struct Collected {
  std::vector<std::string> lines;
  LinePrefixer::Sink sink() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
};

TEST(LinePrefixer, HandsOnWholePrefixedLines) {
  Collected got;
  LinePrefixer lines("[rank 3] ", got.sink());
  auto feed = [&](const std::string& s) { lines.feed(s.data(), s.size()); };
  feed("ab");
  EXPECT_TRUE(got.lines.empty()) << "a partial line waits for its end";
  feed("c\nde\n\nf");
  feed("g\n");
  feed("[rank 3] already prefixed\n");
  feed("[rank 4] another rank's prefix\n");
  feed("tail");
  lines.finish();
  lines.finish();  // nothing left
  EXPECT_EQ(got.lines, (std::vector<std::string>{"[rank 3] abc\n", "[rank 3] de\n", "[rank 3] \n", "[rank 3] fg\n",
                                                 "[rank 3] already prefixed\n",
                                                 "[rank 3] [rank 4] another rank's prefix\n", "[rank 3] tail\n"}));
}

TEST(LinePrefixer, SplitsLinesLongerThanTheLimit) {
  Collected got;
  LinePrefixer lines("> ", got.sink(), 4);
  std::string text = "abcdefghij\n12\n1234\nxyz";
  for (char c : text) lines.feed(&c, 1);  // byte by byte: same result as at once
  lines.finish();
  EXPECT_EQ(got.lines, (std::vector<std::string>{"> abcd\n", "> efgh\n", "> ij\n", "> 12\n", "> 1234\n", "> xyz\n"}));
  Collected at_once;
  LinePrefixer same("> ", at_once.sink(), 4);
  same.feed(text.data(), text.size());
  same.finish();
  EXPECT_EQ(at_once.lines, got.lines);
}

TEST(RankProcess, DescribesHowAProcessEnded) {
  EXPECT_EQ(describe_wait_status(3 << 8), "exited with code 3");
  EXPECT_EQ(describe_wait_status(SIGKILL), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(exit_code_of(3 << 8), 3);
  EXPECT_EQ(exit_code_of(SIGKILL), 137);
  EXPECT_EQ(exit_code_of(0), 0);
  EXPECT_TRUE(succeeded(0));
  EXPECT_FALSE(succeeded(SIGTERM));
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(find_executable("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_EQ(find_executable("/bin/sh", ""), "/bin/sh");
  EXPECT_EQ(find_executable("giant-launch-no-such-program", "/bin:/usr/bin"), "");
  EXPECT_EQ(find_executable("/etc/passwd", ""), "") << "not executable";
}

TEST(SecretFile, IsPrivateHoldsTheSecretAndGoesAway) {
  std::string a = random_secret();
  std::string b = random_secret();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
  std::string path;
  {
    SecretFile file("/tmp", a);
    path = file.path();
    struct stat info {};
    ASSERT_EQ(::stat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u);
    EXPECT_EQ(test::read_file(path), a);
  }
  EXPECT_EQ(::access(path.c_str(), F_OK), -1);
  EXPECT_THROW(SecretFile("/nonexistent-dir", a), Error);
}

TEST(SignalPipe, TurnsSignalsIntoBytesAndRestoresHandlers) {
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  {
    SignalPipe signals;
    EXPECT_THROW(SignalPipe(), Error) << "only one at a time";
    ::raise(SIGTERM);
    ::raise(SIGHUP);
    EXPECT_EQ(signals.take(), (std::vector<int>{SIGTERM, SIGHUP}));
    EXPECT_TRUE(signals.take().empty());
  }
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST(Lifeline, MakesAGroupPerRankThatRanksStartInAndEndsOnlyItsAnchorsOnGoodbye) {
  char path[] = "/tmp/giant-lifeline-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::vector<pid_t> groups;
  pid_t rank = -1;
  {
    Lifeline lifeline(3, path);
    EXPECT_EQ(::getpgid(lifeline.watcher_pid()), lifeline.watcher_pid()) << "the watcher has a group of its own";
    for (int i = 0; i < 3; ++i) {
      groups.push_back(lifeline.group(i));
      EXPECT_EQ(::getpgid(groups.back()), groups.back()) << "each group is led by its anchor";
      EXPECT_NE(groups.back(), ::getpgrp());
    }
    EXPECT_NE(groups[0], groups[1]);
    EXPECT_NE(groups[1], groups[2]);
    SpawnRequest request;
    request.executable = "/bin/sleep";
    request.argv = {"sleep", "30"};
    request.process_group = groups[1];
    SpawnedRank spawned = spawn_rank(request);
    rank = spawned.pid;
    EXPECT_EQ(::getpgid(rank), groups[1]);
    // The launcher ends its ranks before the goodbye, as Supervisor does.
    ::kill(rank, SIGKILL);
    ::waitpid(rank, nullptr, 0);
  }
  for (pid_t group : groups) EXPECT_NE(::kill(-group, 0), 0) << "group " << group << " outlived the goodbye";
  EXPECT_EQ(::access(path, F_OK), 0) << "the file goes only when the launcher dies";
  ::unlink(path);
}

TEST(RunLaunch, RunsRanksInProcessAndChecksOptionsFirst) {
  char pattern[] = "/tmp/giant-launch-parts-XXXXXX";
  int out_fd = ::mkstemp(pattern);
  ASSERT_GE(out_fd, 0);
  LaunchOptions options;
  options.nproc = 2;
  // Rank 1 fails only once rank 0 has printed: otherwise the launcher may
  // stop rank 0 (rank 1's failure) before its line is out.
  const std::string printed = std::string(pattern) + ".printed";
  options.command = {"/bin/sh", "-c",
                     "if [ \"$GIANT_RANK\" = 1 ]; then while [ ! -e " + printed + " ]; do sleep 0.01; done; fi; "
                     "echo \"$GIANT_RANK of $GIANT_WORLD_SIZE on $GIANT_HOST_ID\"; "
                     "if [ \"$GIANT_RANK\" = 0 ]; then touch " + printed + "; fi; exit $GIANT_RANK"};
  options.hosts = parse_host_spec("local:1,local:1");
  options.environment = ccl::Environment(std::map<std::string, std::string>{{"PATH", "/usr/bin:/bin"}});
  options.stdout_fd = out_fd;
  std::ostringstream log;
  EXPECT_EQ(run_launch(options, log), 1);
  std::string out = test::read_file(pattern);
  EXPECT_NE(out.find("[rank 0] 0 of 2 on local\n"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] 1 of 2 on local#1\n"), std::string::npos) << out;
  // Followed by "; stopping the other ranks" when rank 0 is still running then.
  EXPECT_NE(log.str().find("giant launch: rank 1 exited with code 1"), std::string::npos) << log.str();
  ::close(out_fd);
  ::unlink(pattern);
  ::unlink(printed.c_str());

  auto rejects = [&](LaunchOptions bad, const std::string& key) {
    std::ostringstream ignored;
    try {
      run_launch(bad, ignored);
      ADD_FAILURE() << "accepted; expected an error about " << key;
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
    }
  };
  LaunchOptions bad = options;
  bad.command.clear();
  rejects(bad, "command");
  bad = options;
  bad.hosts.clear();
  bad.nproc = 0;
  rejects(bad, "--nproc");
  bad = options;
  bad.nproc = 3;
  rejects(bad, "--nproc");
  bad = options;
  bad.grace_seconds = -1;
  rejects(bad, "--timeout-grace");
  bad = options;
  bad.hosts = parse_host_spec("netns:giant-launch-test-none:1");
  bad.nproc = 0;
  rejects(bad, "--store-addr");
  bad.store_address = "10.0.0.1:99999";
  rejects(bad, "--store-addr");
  bad.store_address = "10.0.0.1:4000";
  rejects(bad, "--hosts");  // no such namespace
}

}  // namespace
}  // namespace giant::launch
