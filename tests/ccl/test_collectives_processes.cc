// Every collective over ranks as processes: the test process serves a
// TcpStore on 127.0.0.1 (port 0) and forks the ranks, which run every check
// of support/collective_checks.h in one launch per world size. Also a
// FileStore run, and tests of the process harness itself.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <thread>

#include "ccl/support/collective_checks.h"
#include "ccl/support/ranks.h"
#include "giant/base/error.h"
#include "giant/base/timer.h"

namespace giant::ccl::test {
namespace {

// Runs every check on a communicator over the group's store. Each failed
// check goes to the rank's report; the exit code is the number of failed
// checks.
ProcessBody every_check(CollectivePlan plan) {
  return [plan](ProcessContext& context) mutable {
    plan.store = context.store;
    auto comm = Communicator::create(context.store, context.rank, context.size, test_config());
    int failed_checks = 0;
    for (const NamedCheck& check : all_checks()) {
      Findings findings;
      Stopwatch watch;
      check.function(*comm, plan, findings);
      context.put(std::string("seconds_") + check.name, std::to_string(watch.seconds()));
      if (!findings.empty()) {
        context.report(std::string(check.name) + ":\n" + findings.text());
        ++failed_checks;
      }
    }
    Findings findings;  // nobody tears down while a peer still finishes
    if (!run_op("final barrier", findings, [&] { return barrier(*comm); })) {
      context.report(findings.text());
      ++failed_checks;
    }
    return failed_checks;
  };
}

class CollectivesProcesses : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesProcesses, EveryCollectiveOverTcpStore) {
  const int n = GetParam();
  ProcessOptions options;
  options.store = StoreKind::tcp;
  options.deadline = std::chrono::seconds(240);
  ProcessGroup group(n, every_check(CollectivePlan{}), options);
  const auto& exits = group.wait_all();
  expect_all_ok(exits, "n=" + std::to_string(n));
  // How long each check took on rank 0, to keep the suite's time in view.
  std::string timings;
  for (const NamedCheck& check : all_checks()) {
    auto seconds = group.value(0, std::string("seconds_") + check.name);
    if (seconds) timings += std::string(" ") + check.name + "=" + *seconds;
  }
  std::printf("n=%d seconds per check on rank 0:%s\n", n, timings.c_str());
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesProcesses, ::testing::Range(1, 6),
                         [](const ::testing::TestParamInfo<int>& info) { return "n" + std::to_string(info.param); });

TEST(CollectivesProcessesFileStore, EveryCollectiveSmallCounts) {
  CollectivePlan plan;
  plan.counts = {1, 7};
  plan.big_cases.clear();
  ProcessOptions options;
  options.store = StoreKind::file;
  for (int n : {2, 3}) expect_all_ok(run_processes(n, every_check(plan), options), "FileStore n=" + std::to_string(n));
}

// The harness itself: exit codes, exceptions, reports, values and the deadline.
TEST(ProcessHarness, ReportsExitCodesExceptionsAndValues) {
  auto exits = run_processes(3, [](ProcessContext& context) -> int {
    context.put("hello", "from " + std::to_string(context.rank));
    context.store->add("arrived", 1);
    if (context.rank == 1) throw CommError(2, "a test error");
    if (context.rank == 2) {
      context.report("rank two says hi");
      return 7;
    }
    return 0;
  });
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_TRUE(exits[0].ok()) << exits[0].describe();
  EXPECT_EQ(exits[1].exit_code, 2);
  EXPECT_NE(exits[1].report.find("CommError (peer 2): a test error"), std::string::npos) << exits[1].report;
  EXPECT_EQ(exits[2].exit_code, 7);
  EXPECT_EQ(exits[2].report, "rank two says hi\n");
}

TEST(ProcessHarness, KillsRanksAtTheDeadline) {
  ProcessOptions options;
  options.deadline = std::chrono::milliseconds(1500);
  Stopwatch watch;
  ProcessGroup group(
      2,
      [](ProcessContext& context) -> int {
        context.put("value", "42");
        if (context.rank == 1) ::pause();  // never returns
        return 0;
      },
      options);
  EXPECT_TRUE(group.wait_for(1, "value", Deadline::after(std::chrono::seconds(10))));
  EXPECT_EQ(group.value(1, "value").value_or(""), "42");
  const auto& exits = group.wait_all();
  EXPECT_LT(watch.seconds(), 5.0);
  EXPECT_TRUE(exits[0].ok()) << exits[0].describe();
  EXPECT_TRUE(exits[1].killed_at_deadline) << exits[1].describe();
  EXPECT_EQ(exits[1].term_signal, SIGKILL);
}

TEST(ProcessHarness, RanksReachEachOtherThroughTheStore) {
  for (StoreKind kind : {StoreKind::tcp, StoreKind::file}) {
    ProcessOptions options;
    options.store = kind;
    auto exits = run_processes(4, [](ProcessContext& context) -> int {
      context.store->set("from" + std::to_string(context.rank), to_bytes(std::to_string(context.rank * 10)));
      for (int r = 0; r < context.size; ++r) {
        Bytes value = context.store->get("from" + std::to_string(r), std::chrono::seconds(20));
        if (to_string(value) != std::to_string(r * 10)) return 1;
      }
      return 0;
    }, options);
    expect_all_ok(exits, kind == StoreKind::tcp ? "tcp store" : "file store");
  }
}

}  // namespace
}  // namespace giant::ccl::test
