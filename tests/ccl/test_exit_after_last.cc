// Ranks that leave straight after their last operation: a peer that has done
// its part and then exited is not a failure. Each round forks a fresh group
// that runs one collective (exact inputs, result checked) and returns at
// once, so the first rank done exits while the others still finish. Rounds
// cycle through every collective, world sizes 2 to 5, shm and tcp, and
// whether a rank destroys its communicator (saying goodbye) or leaves
// without a word (_exit with the communicator still open).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "ccl/support/ranks.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"

namespace giant::ccl::test {
namespace {

enum class LastOp { barrier, allreduce, reduce_scatter, allgather, broadcast, reduce, gather, scatter, alltoall, send_recv };
constexpr LastOp kLastOps[] = {LastOp::barrier, LastOp::allreduce, LastOp::reduce_scatter, LastOp::allgather,
                               LastOp::broadcast, LastOp::reduce,  LastOp::gather,        LastOp::scatter,
                               LastOp::alltoall,  LastOp::send_recv};
constexpr int kOps = static_cast<int>(std::size(kLastOps));

struct Round {
  int size = 2;
  LastOp op = LastOp::barrier;
  std::string transport = "auto";
  size_t count = 1;      // elements per rank (or per block)
  bool goodbye = true;   // destroy the communicator before exiting
  int stagger_us = 0;    // the most a rank waits before the operation
};

// Integers small enough that every sum is exact in f32.
float value(int rank, size_t i) { return static_cast<float>(rank + 1) * static_cast<float>(i % 7 + 1); }

// value(r, i) summed over the n ranks.
float summed_value(int n, size_t i) {
  float s = 0;
  for (int r = 0; r < n; ++r) s += value(r, i);
  return s;
}

// The rooted operations of run_last_op: runs one and returns what this
// rank's output should hold.
std::vector<float> run_rooted_op(Communicator& comm, LastOp op, size_t c, std::vector<float>& in,
                                 std::vector<float>& out) {
  const int me = comm.rank();
  const int n = comm.size();
  std::vector<float> want;
  auto sum_over_ranks = [&](size_t i) { return summed_value(n, i); };
  switch (op) {
    case LastOp::broadcast: {
      BroadcastOptions o;
      o.input = in.data(), o.output = out.data(), o.count = c, o.root = n - 1;
      broadcast(comm, o).wait();
      for (size_t i = 0; i < c; ++i) want.push_back(value(n - 1, i));
      break;
    }
    case LastOp::reduce: {
      ReduceOptions o;
      o.input = in.data(), o.output = out.data(), o.count = c, o.root = 0;
      reduce(comm, o).wait();
      if (me == 0)
        for (size_t i = 0; i < c; ++i) want.push_back(sum_over_ranks(i));
      break;
    }
    case LastOp::gather: {
      GatherOptions o;
      o.input = in.data(), o.output = out.data(), o.count = c, o.root = 0;
      gather(comm, o).wait();
      if (me == 0)
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < c; ++i) want.push_back(value(r, i));
      break;
    }
    case LastOp::scatter: {
      ScatterOptions o;
      o.input = in.data(), o.output = out.data(), o.count = c, o.root = 0;
      scatter(comm, o).wait();
      for (size_t i = 0; i < c; ++i) want.push_back(value(0, me * c + i));
      break;
    }
    default:
      break;
  }
  return want;
}

// Runs the round's operation and returns how many elements came out wrong.
size_t run_last_op(Communicator& comm, const Round& round) {
  const int me = comm.rank();
  const int n = comm.size();
  const size_t c = round.count;
  std::vector<float> in(c * n), out(c * n, -1.0f), want;
  for (size_t i = 0; i < in.size(); ++i) in[i] = value(me, i);
  auto sum_over_ranks = [&](size_t i) { return summed_value(n, i); };
  switch (round.op) {
    case LastOp::barrier:
      barrier(comm).wait();
      return 0;
    case LastOp::allreduce: {
      AllreduceOptions o;
      o.input = in.data(), o.output = out.data(), o.count = c;
      allreduce(comm, o).wait();
      for (size_t i = 0; i < c; ++i) want.push_back(sum_over_ranks(i));
      break;
    }
    case LastOp::reduce_scatter: {
      ReduceScatterOptions o;
      o.input = in.data(), o.output = out.data(), o.count = c;
      reduce_scatter(comm, o).wait();
      for (size_t i = 0; i < c; ++i) want.push_back(sum_over_ranks(me * c + i));
      break;
    }
    case LastOp::allgather: {
      AllgatherOptions o;
      o.input = in.data(), o.output = out.data(), o.count = c;
      allgather(comm, o).wait();
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) want.push_back(value(r, i));
      break;
    }
    case LastOp::alltoall: {
      AlltoallOptions o;
      o.input = in.data(), o.output = out.data(), o.count = c;
      alltoall(comm, o).wait();
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i) want.push_back(value(r, me * c + i));
      break;
    }
    case LastOp::broadcast:
    case LastOp::reduce:
    case LastOp::gather:
    case LastOp::scatter:
      want = run_rooted_op(comm, round.op, c, in, out);
      break;
    case LastOp::send_recv: {
      // A ring: each rank sends to the next and receives from the previous.
      SendOptions s;
      s.buffer = in.data(), s.nbytes = c * sizeof(float), s.peer = (me + 1) % n;
      RecvOptions r;
      r.buffer = out.data(), r.nbytes = c * sizeof(float), r.peer = (me + n - 1) % n;
      Work sent = send(comm, s);
      recv(comm, r).wait();
      sent.wait();
      for (size_t i = 0; i < c; ++i) want.push_back(value((me + n - 1) % n, i));
      break;
    }
  }
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += out[i] != want[i];
  return wrong;
}

ProcessBody last_op_then_exit(Round round) {
  return [round](ProcessContext& context) -> int {
    CommConfig config = test_config();
    config.transport = round.transport;
    auto comm = Communicator::create(context.store, context.rank, context.size, config);
    // Stagger the ranks a little, so that any of them may be the first done.
    if (round.stagger_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds((context.rank * 37 + round.size * 11) % round.stagger_us));
    }
    size_t wrong = run_last_op(*comm, round);
    if (wrong > 0) {
      context.report(std::to_string(wrong) + " wrong elements");
      return 1;
    }
    if (!round.goodbye) ::_exit(0);  // as a process that exits with its communicator open
    return 0;
  };
}

std::string describe(const Round& r, int index) {
  static const char* names[] = {"barrier", "allreduce", "reduce_scatter", "allgather", "broadcast",
                                "reduce",  "gather",    "scatter",        "alltoall",  "send_recv"};
  return "round " + std::to_string(index) + ": " + names[static_cast<int>(r.op)] + " n=" + std::to_string(r.size) +
         " transport=" + r.transport + " count=" + std::to_string(r.count) +
         " stagger_us=" + std::to_string(r.stagger_us) + (r.goodbye ? "" : " (no goodbye)");
}

Round round_number(int index) {
  Round r;
  r.op = kLastOps[index % kOps];
  r.size = 2 + (index / kOps) % 4;
  r.transport = (index / (kOps * 4)) % 2 == 0 ? "auto" : "tcp";
  r.count = (index / (kOps * 8)) % 2 == 0 ? 1 : 40'000;  // one shm step, or several chunks
  r.goodbye = index % 3 != 2;
  r.stagger_us = (index / (kOps * 16)) % 3 * 200;  // none, up to 200 us, up to 400 us
  return r;
}

// 960 rounds: every operation at every size, on both transports, at both
// counts, with and without goodbye, at three staggers.
TEST(ExitAfterLastCollective, NoPeerThatFinishedIsReportedDead) {
  constexpr int kRounds = kOps * 4 * 2 * 2 * 3 * 2;
  ProcessOptions options;
  options.deadline = std::chrono::seconds(60);
  // Failures are collected and reported at the end: a forked rank inherits
  // the parent's failed state and would report failing too.
  std::vector<std::string> failures;
  for (int i = 0; i < kRounds && failures.size() < 5; ++i) {
    Round round = round_number(i);
    auto exits = run_processes(round.size, last_op_then_exit(round), options);
    for (const RankExit& e : exits) {
      if (!e.ok()) failures.push_back(describe(round, i) + ": " + e.describe());
    }
  }
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace giant::ccl::test
