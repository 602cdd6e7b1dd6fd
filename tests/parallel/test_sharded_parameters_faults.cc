// A ZeRO-3 gather whose peer is dead (SIGKILL) or stopped (SIGSTOP) ends in
// ccl's named error (CommError, or its TimeoutError) on the survivor within
// twice the communicator's timeout, like every other collective. Ranks are
// forked processes over a FileStore (a thread cannot be killed); the victim
// signals itself right after a whole step done together, and the survivor's
// next forward then gathers its first layer from it. A binary of its own:
// nothing in this process touches libtorch's thread pools before the fork.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/parallel/data_parallel/sharded_parameters.h"
#include "parallel/support/linear_stack.h"

namespace giant::parallel {
namespace {

using namespace std::chrono_literals;

constexpr auto kTimeout = 2000ms;
constexpr double kTimeoutSeconds = 2.0;
// Twice the timeout, plus a little for scheduling on 2 busy cores.
constexpr double kWithin = 2 * kTimeoutSeconds + 0.25;

// Rank `rank`'s life; the survivor writes "<error kind> <seconds>" to `result`.
int run_rank(int rank, const std::string& directory, int victim_signal, const std::string& result) {
  try {
    torch::set_num_threads(1);
    auto store = std::make_shared<ccl::FileStore>(directory + "/store");
    ccl::CommConfig config;
    config.timeout = kTimeout;
    config.connect_timeout = 30s;
    auto comm = ccl::Communicator::create(store, rank, 2, config);
    std::vector<LayerStack> chunks{test::make_linear_stack()};
    ShardedParameters sharded(chunks, chunks[0]->parameters(), *comm, {}, nullptr);
    sharded.zero_grad();
    sharded.begin_micro_batch(true);
    chunks[0]->forward(test::linear_stack_input(rank, 0, 0)).sum().backward();
    sharded.finish();
    if (rank == 1) raise(victim_signal);  // SIGSTOP: the parent kills it later
    std::string kind = "none";
    Stopwatch watch;
    try {
      torch::NoGradGuard no_grad;
      chunks[0]->forward(test::linear_stack_input(rank, 0, 1));
    } catch (const TimeoutError&) {
      kind = "TimeoutError";
    } catch (const CommError&) {
      kind = "CommError";
    } catch (const std::exception& e) {
      kind = std::string("other:") + e.what();
    }
    std::ofstream(result) << kind << ' ' << watch.seconds() << '\n';
    std::fflush(nullptr);
    _exit(0);  // no destructors: the communicator's peer is gone
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    _exit(2);
  }
}

void survivor_sees_named_error(int victim_signal) {
  char pattern[] = "/tmp/giant-zero3-faults-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string directory = pattern;
  const std::string result = directory + "/result";
  pid_t pids[2];
  for (int rank = 0; rank < 2; ++rank) {
    pids[rank] = fork();
    ASSERT_GE(pids[rank], 0);
    if (pids[rank] == 0) run_rank(rank, directory, victim_signal, result);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pids[0], &status, 0), pids[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "survivor status " << status;
  kill(pids[1], SIGCONT);
  kill(pids[1], SIGKILL);
  waitpid(pids[1], &status, 0);
  std::ifstream in(result);
  std::string kind;
  double seconds = -1;
  in >> kind >> seconds;
  std::printf("victim %s: survivor's gather ended in %s after %.2f s (timeout %.1f s)\n",
              victim_signal == SIGKILL ? "killed" : "stopped", kind.c_str(), seconds, kTimeoutSeconds);
  EXPECT_TRUE(kind == "CommError" || kind == "TimeoutError") << kind;
  if (victim_signal == SIGSTOP) {
    EXPECT_EQ(kind, "TimeoutError");
  }
  EXPECT_GE(seconds, 0);
  EXPECT_LE(seconds, kWithin);
  std::system(("rm -rf '" + directory + "'").c_str());
}

TEST(ShardedParametersFaults, AKilledPeersGatherEndsInCommError) { survivor_sees_named_error(SIGKILL); }

TEST(ShardedParametersFaults, AStoppedPeersGatherEndsInTimeoutError) { survivor_sees_named_error(SIGSTOP); }

}  // namespace
}  // namespace giant::parallel
