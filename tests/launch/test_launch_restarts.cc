// `giant launch --max-restarts`: a failed rank stops every rank and the
// launch starts them all again with GIANT_TRAIN_RESUME=auto, until they
// succeed or the restarts run out (then with the last failure named); a
// signal to the launcher is never followed by a restart; bad flags exit 2.
// The ranks are shell commands that count their attempts in files.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <string>
#include <vector>

#include "launch/support/launch_cli.h"
#include "launch/support/launch_runner.h"

namespace giant::launch::test {
namespace {

std::vector<std::string> sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

// Appends this attempt's GIANT_TRAIN_RESUME and GIANT_TRAIN_RESTART (or
// "unset") to $D/attempts.RANK; $N is then the number of attempts so far.
const char* kCountAttempt =
    "echo \"${GIANT_TRAIN_RESUME:-unset} ${GIANT_TRAIN_RESTART:-unset}\" >> $D/attempts.$GIANT_RANK; "
    "N=$(wc -l < $D/attempts.$GIANT_RANK); ";

std::vector<std::string> attempts_of(const std::string& dir, int rank) {
  std::ifstream in(dir + "/attempts." + std::to_string(rank));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(LaunchRestarts, AFailedRankRestartsEveryRankWithResumeAutoUntilTheySucceed) {
  // Rank 1 fails its first two attempts, while rank 0 waits to be stopped.
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--max-restarts", "3", "--restart-backoff", "0", "--"},
                                    sh(std::string(kCountAttempt) +
                                       "if [ $GIANT_RANK = 1 ] && [ $N -lt 3 ]; then exit 3; fi; "
                                       "if [ $GIANT_RANK = 0 ] && [ $N -lt 3 ]; then sleep 30; fi; echo done $N")));
  auto status = launch.wait(60);
  ASSERT_TRUE(status.has_value()) << "the launch did not end in 60 s\n" << launch.err();
  const std::string err = launch.err();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "status " << *status << "\n" << err;
  const std::string first = "giant launch: restart 1 of 3 after rank 1 exited with code 3 (the attempt ran ";
  EXPECT_NE(err.find(first), std::string::npos) << err;
  EXPECT_NE(err.find("giant launch: restart 2 of 3 after rank 1 exited with code 3"), std::string::npos) << err;
  EXPECT_NE(err.find("starting every rank again at once with train.resume=auto"), std::string::npos) << err;
  EXPECT_EQ(count(err, "giant launch: restart "), 2u) << err;
  const std::vector<std::string> expected{"unset unset", "auto 1", "auto 2"};
  EXPECT_EQ(attempts_of(launch.dir(), 0), expected);
  EXPECT_EQ(attempts_of(launch.dir(), 1), expected);
  EXPECT_NE(launch.out().find("[rank 0] done 3\n"), std::string::npos) << launch.out();
}

TEST(LaunchRestarts, WhenTheRestartsRunOutTheLaunchEndsWithTheLastFailure) {
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--max-restarts", "2", "--restart-backoff", "10ms", "--"},
                                    sh(std::string(kCountAttempt) + "if [ $GIANT_RANK = 0 ]; then exit 5; fi")));
  auto status = launch.wait(60);
  ASSERT_TRUE(status.has_value()) << launch.err();
  const std::string err = launch.err();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 5) << "status " << *status << "\n" << err;
  EXPECT_EQ(count(err, "giant launch: restart "), 2u) << err;
  EXPECT_NE(err.find("giant launch: giving up after 2 restarts; the last failure: rank 0 exited with code 5"),
            std::string::npos)
      << err;
  EXPECT_EQ(attempts_of(launch.dir(), 0).size(), 3u);
}

// Rank 0 records the step it reached (as giant train's rank 0 does in
// GIANT_TRAIN_PROGRESS_FILE); a failure the same as the attempt before's
// (whichever rank meets it first), at the same step, would only come back:
// no restart follows it.
TEST(LaunchRestarts, TheSameFailureAtTheSameStepTwiceEndsTheRestarts) {
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--max-restarts", "5", "--restart-backoff", "0", "--"},
                                    sh(std::string(kCountAttempt) +
                                       "if [ $GIANT_RANK = 0 ]; then echo 6 > $GIANT_TRAIN_PROGRESS_FILE; fi; "
                                       "if [ $GIANT_RANK = $((N % 2)) ]; then "
                                       "while [ ! -s $GIANT_TRAIN_PROGRESS_FILE ]; do sleep 0.01; done; exit 4; fi; "
                                       "sleep 30")));
  auto status = launch.wait(60);
  ASSERT_TRUE(status.has_value()) << launch.err();
  const std::string err = launch.err();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 4) << "status " << *status << "\n" << err;
  EXPECT_EQ(count(err, "giant launch: restart "), 1u) << err;
  EXPECT_NE(err.find("giant launch: rank 0 exited with code 4 at step 6 again, as in the attempt before: a restart "
                     "would fail the same way, so none follows"),  // rank 1 failed first, then rank 0
            std::string::npos)
      << err;
  EXPECT_EQ(attempts_of(launch.dir(), 0).size(), 2u);
}

// A failure that moves on (a later step each time) is restarted again.
TEST(LaunchRestarts, AFailureAtALaterStepEachTimeIsRestartedAgain) {
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--max-restarts", "2", "--restart-backoff", "0", "--"},
                                    sh(std::string(kCountAttempt) +
                                       "if [ $GIANT_RANK = 0 ]; then echo $((5 + N)) > $GIANT_TRAIN_PROGRESS_FILE; "
                                       "exit 4; fi; sleep 30")));
  auto status = launch.wait(60);
  ASSERT_TRUE(status.has_value()) << launch.err();
  const std::string err = launch.err();
  EXPECT_EQ(count(err, "giant launch: restart "), 2u) << err;
  EXPECT_NE(err.find("giant launch: giving up after 2 restarts; the last failure: rank 0 exited with code 4"),
            std::string::npos)
      << err;
  EXPECT_EQ(attempts_of(launch.dir(), 0).size(), 3u);
}

TEST(LaunchRestarts, ASignalToTheLauncherIsNeverFollowedByARestart) {
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--max-restarts", "5", "--"},
                                    sh(std::string(kCountAttempt) + "echo $$ > $D/pid.$GIANT_RANK.tmp; "
                                                                    "mv $D/pid.$GIANT_RANK.tmp $D/pid.$GIANT_RANK; "
                                                                    "exec sleep 30")));
  ASSERT_TRUE(wait_for_files(launch.dir(), {"pid.0", "pid.1"}, 20)) << launch.err();
  ASSERT_EQ(::kill(launch.pid(), SIGTERM), 0);
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value()) << launch.err();
  const std::string err = launch.err();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 128 + SIGTERM) << *status << "\n" << err;
  EXPECT_EQ(count(err, "giant launch: restart "), 0u) << err;
  EXPECT_EQ(attempts_of(launch.dir(), 0).size(), 1u);
}

// Ctrl-C while the ranks are being stopped after a failure: no restart
// either. Rank 1 fails once rank 0 ignores SIGTERM, so the stop lasts.
TEST(LaunchRestarts, ASignalWhileTheRanksAreStoppedAfterAFailureIsNotFollowedByARestart) {
  LaunchProcess launch(kCli, concat({"--nproc", "2", "--max-restarts", "5", "--timeout-grace", "20s", "--"},
                                    sh(std::string(kCountAttempt) +
                                       "if [ $GIANT_RANK = 1 ]; then while [ ! -e $D/ready.0 ]; do sleep 0.01; done; "
                                       "exit 3; fi; "
                                       "trap 'touch $D/asked.0' TERM; touch $D/ready.0; while :; do sleep 0.05; done")));
  ASSERT_TRUE(wait_for_files(launch.dir(), {"asked.0"}, 20)) << launch.err();
  ASSERT_EQ(::kill(launch.pid(), SIGTERM), 0);  // rank 0 ignores the launcher's SIGTERM; this one too
  auto status = launch.wait(20);
  ASSERT_TRUE(status.has_value()) << launch.err();
  const std::string err = launch.err();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << *status << "\n" << err;
  EXPECT_EQ(count(err, "giant launch: restart "), 0u) << err;
  EXPECT_EQ(attempts_of(launch.dir(), 0).size(), 1u);
}

TEST(LaunchRestarts, BadRestartFlagsExitWithStatus2NamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--nproc", "1", "--max-restarts", "-1", "--", "true"}, "--max-restarts: must be 0 or more, got -1"},
      {{"--nproc", "1", "--max-restarts", "many", "--", "true"}, "--max-restarts: expects an integer, got 'many'"},
      {{"--nproc", "1", "--max-restarts", "1", "--restart-backoff", "later", "--", "true"},
       "--restart-backoff: expects a duration"},
  };
  for (const auto& [args, says] : cases) {
    LaunchProcess launch(kCli, args);
    auto status = launch.wait(10);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << says << ": status " << *status;
    EXPECT_NE(launch.err().find(says), std::string::npos) << launch.err();
  }
}

}  // namespace
}  // namespace giant::launch::test
