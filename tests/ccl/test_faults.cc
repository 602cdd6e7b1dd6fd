// Faults, over ranks as processes with short timeouts: a rank killed or
// stopped in the middle of a large allreduce, abort() from another thread,
// mismatched operations, failures after a failure, and a TcpStore facing a
// wrong secret or a hostile client. Each test checks the error type, the
// peer named, and that every rank returned in time.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <thread>

#include "ccl/support/collective_checks.h"
#include "ccl/support/ranks.h"
#include "giant/base/error.h"
#include "giant/base/timer.h"
#include "giant/ccl/shared_buffer.h"

namespace giant::ccl::test {
namespace {

constexpr auto kTimeout = std::chrono::milliseconds(2000);
constexpr double kTimeoutSeconds = 2.0;
// "Within twice the timeout", plus a little for scheduling on 2 busy cores.
constexpr double kWithin = 2 * kTimeoutSeconds + 0.25;
constexpr size_t kLargeCount = (32 << 20) / 4;  // 32 MiB of f32

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool mentions(const std::string& text, const std::string& word) {
  return lower(text).find(lower(word)) != std::string::npos;
}

// Records an error for the parent: kind, peer, message and when it was caught.
void put_error(const ProcessContext& context, const std::string& prefix, const ErrorInfo& info, int64_t when_ns) {
  context.put(prefix + "_kind", info.kind);
  context.put(prefix + "_peer", std::to_string(info.peer));
  context.put(prefix + "_what", info.what);
  context.put(prefix + "_ns", std::to_string(when_ns));
}

// After a failure: a new operation must fail at once (issue or wait), and
// the communicator must say it failed.
void probe_after_failure(const ProcessContext& context, Communicator& comm) {
  std::vector<float> small(16, 1.0f);
  AllreduceOptions options;
  options.input = options.output = small.data();
  options.count = small.size();
  const int64_t start = monotonic_ns();
  ErrorInfo info;
  try {
    allreduce(comm, options).wait();
  } catch (...) {
    info = ErrorInfo::from(std::current_exception());
  }
  context.put("after_kind", info.kind);
  context.put("after_seconds", std::to_string(seconds_between(start, monotonic_ns())));
  context.put("failed", comm.failed() ? "1" : "0");
}

// Where the large transfers of the fault tests run: allreduces over the tcp
// ring, shared memory slots, or in place on shared buffers (peers read each
// other's); or point-to-point messages around a ring of ranks, which go
// through the shared-memory mailboxes.
enum class Path { ring, shm, shared_buffer, p2p };
const char* path_name(Path path) {
  switch (path) {
    case Path::ring: return "ring";
    case Path::shm: return "shm";
    case Path::shared_buffer: return "shared_buffer";
    case Path::p2p: return "p2p";
  }
  return "?";
}

// Rank r sends to r + 1 and receives from r - 1, both posted before either is waited.
void p2p_ring_step(Communicator& comm, const std::vector<float>& outgoing, std::vector<float>& incoming) {
  const int n = comm.size();
  RecvOptions r;
  r.buffer = incoming.data();
  r.nbytes = incoming.size() * sizeof(float);
  r.peer = (comm.rank() + n - 1) % n;
  SendOptions s;
  s.buffer = outgoing.data();
  s.nbytes = outgoing.size() * sizeof(float);
  s.peer = (comm.rank() + 1) % n;
  Work received = recv(comm, r);
  Work sent = send(comm, s);
  received.wait();
  sent.wait();
}

// Loops large allreduces (or ring exchanges, on Path::p2p) until one fails;
// puts "running" after the first one and the error under "error_*".
int allreduce_until_failure(ProcessContext& context, Communicator& comm, size_t count, Path path = Path::ring) {
  std::vector<float> input(count, 1.0f), output(count, 0.0f);
  std::shared_ptr<SharedBuffer> shared;
  AllreduceOptions options;
  options.input = input.data();
  options.output = output.data();
  options.count = count;
  options.algorithm = path == Path::ring ? Algorithm::ring : Algorithm::shm;
  if (path == Path::shared_buffer) {
    shared = allocate_shared_buffer(comm, count * sizeof(float));
    if (!shared->shared()) context.report("the shared buffer is plain memory");
    options.input = options.output = shared->data();
  }
  try {
    for (int iteration = 0; iteration < 100000; ++iteration) {
      if (path == Path::p2p) p2p_ring_step(comm, input, output);
      else allreduce(comm, options).wait();
      if (iteration == 0) context.put("running");
    }
    context.report(std::string(path_name(path)) + ": the loop ended without an error");
    return 1;
  } catch (...) {
    put_error(context, "error", ErrorInfo::from(std::current_exception()), monotonic_ns());
  }
  probe_after_failure(context, comm);
  return 0;
}

struct Survivor {
  std::string kind;
  int peer = -2;
  std::string what;
  double seconds_after_event = 0;  // from the fault to the error
};

// Reads a surviving rank's error from the group, failing the test if it is missing.
Survivor survivor_of(ProcessGroup& group, int rank, int64_t event_ns, const std::string& test) {
  Survivor s;
  s.kind = group.value(rank, "error_kind").value_or("(none reported)");
  s.peer = std::stoi(group.value(rank, "error_peer").value_or("-9"));
  s.what = group.value(rank, "error_what").value_or("");
  s.seconds_after_event = seconds_between(event_ns, std::stoll(group.value(rank, "error_ns").value_or("0")));
  return s;
}

// Common assertions for ranks that must fail with `kind` naming `culprit`.
void expect_survivor(ProcessGroup& group, int rank, int64_t event_ns, const std::string& kind, int culprit,
                     const std::string& test) {
  const RankExit& e = group.wait_all()[rank];
  EXPECT_TRUE(e.ok()) << test << ": " << e.describe();
  Survivor s = survivor_of(group, rank, event_ns, test);
  EXPECT_EQ(s.kind, kind) << test << " rank " << rank << ": " << s.what;
  EXPECT_EQ(s.peer, culprit) << test << " rank " << rank << " blamed the wrong peer: " << s.what;
  EXPECT_GE(s.seconds_after_event, 0.0) << test << " rank " << rank << " failed before the fault: " << s.what;
  EXPECT_LE(s.seconds_after_event, kWithin) << test << " rank " << rank << " failed too late: " << s.what;
  EXPECT_EQ(group.value(rank, "failed").value_or(""), "1") << test << " rank " << rank << ": failed() is false";
  const std::string after = group.value(rank, "after_kind").value_or("(none)");
  EXPECT_TRUE(after == "CommError" || after == "TimeoutError")
      << test << " rank " << rank << ": an operation after the failure gave " << after;
  EXPECT_LE(std::stod(group.value(rank, "after_seconds").value_or("99")), 0.5)
      << test << " rank " << rank << ": an operation after the failure did not fail at once";
  // The rank ended soon after its error (no hang tearing down).
  EXPECT_LE(seconds_between(event_ns, e.ended_ns), kWithin + 3.0) << test << " rank " << rank << " ended late";
}

ProcessOptions fault_options() {
  ProcessOptions options;
  options.deadline = std::chrono::seconds(30);
  return options;
}

ProcessBody large_allreduce_loop(Path path) {
  return [path](ProcessContext& context) {
    auto comm = Communicator::create(context.store, context.rank, context.size, test_config(kTimeout));
    return allreduce_until_failure(context, *comm, kLargeCount, path);
  };
}

void wait_until_all_running(ProcessGroup& group) {
  for (int rank = 0; rank < group.size(); ++rank) {
    ASSERT_TRUE(group.wait_for(rank, "running", Deadline::after(std::chrono::seconds(30))))
        << "rank " << rank << " never completed its first allreduce: " << group.wait_all()[rank].describe();
  }
}

class FaultsOnEveryPath : public ::testing::TestWithParam<Path> {};

TEST_P(FaultsOnEveryPath, KilledRankIsNamedByEverySurvivor) {
  for (auto [n, victim] : {std::pair{3, 1}, std::pair{4, 2}}) {
    const std::string test = std::string(path_name(GetParam())) + " SIGKILL n=" + std::to_string(n) +
                             " victim=" + std::to_string(victim);
    ProcessGroup group(n, large_allreduce_loop(GetParam()), fault_options());
    wait_until_all_running(group);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // well inside some allreduce
    const int64_t kill_ns = monotonic_ns();
    group.signal(victim, SIGKILL);
    const auto& exits = group.wait_all();
    EXPECT_EQ(exits[victim].term_signal, SIGKILL) << exits[victim].describe();
    for (int rank = 0; rank < n; ++rank) {
      if (rank != victim) expect_survivor(group, rank, kill_ns, "CommError", victim, test);
    }
  }
}

TEST_P(FaultsOnEveryPath, StoppedRankTimesOutEverySurvivor) {
  const int n = 4;
  const int victim = 1;
  const std::string test = std::string(path_name(GetParam())) + " SIGSTOP n=4 victim=1";
  ProcessGroup group(n, large_allreduce_loop(GetParam()), fault_options());
  wait_until_all_running(group);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const int64_t stop_ns = monotonic_ns();
  group.signal(victim, SIGSTOP);
  for (int rank = 0; rank < n; ++rank) {
    if (rank != victim) group.wait_rank(rank, Deadline::after(std::chrono::seconds(20)));
  }
  group.signal(victim, SIGCONT);  // let it notice on its own, or kill it
  if (!group.wait_rank(victim, Deadline::after(std::chrono::seconds(10)))) group.kill_rank(victim);
  for (int rank = 0; rank < n; ++rank) {
    if (rank != victim) expect_survivor(group, rank, stop_ns, "TimeoutError", victim, test);
  }
  std::printf("%s: the stopped rank, once continued, reported %s (peer %s)\n", test.c_str(),
              group.value(victim, "error_kind").value_or("nothing").c_str(),
              group.value(victim, "error_peer").value_or("?").c_str());
}

INSTANTIATE_TEST_SUITE_P(Paths, FaultsOnEveryPath, ::testing::Values(Path::ring, Path::shm, Path::shared_buffer, Path::p2p),
                         [](const auto& info) { return std::string(path_name(info.param)); });

TEST(Faults, AbortFromAnotherThreadFailsEveryRank) {
  const int n = 3;
  const int aborter = 1;
  const std::string reason = "fault test abort";
  ProcessGroup group(n, [&](ProcessContext& context) {
    auto comm = Communicator::create(context.store, context.rank, context.size, test_config(kTimeout));
    std::thread abort_thread;
    if (context.rank == aborter) {
      abort_thread = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        context.put("abort_ns", std::to_string(monotonic_ns()));
        comm->abort(reason);
      });
    }
    const int code = allreduce_until_failure(context, *comm, kLargeCount / 8);
    if (abort_thread.joinable()) abort_thread.join();
    return code;
  }, fault_options());
  group.wait_all();
  ASSERT_TRUE(group.value(aborter, "abort_ns")) << group.wait_all()[aborter].describe();
  const int64_t abort_ns = std::stoll(*group.value(aborter, "abort_ns"));
  for (int rank = 0; rank < n; ++rank) {
    expect_survivor(group, rank, abort_ns, "CommError", aborter, "abort");
  }
  EXPECT_TRUE(mentions(group.value(aborter, "error_what").value_or(""), reason))
      << "the aborting rank's error does not give the reason: " << group.value(aborter, "error_what").value_or("");
  for (int rank = 0; rank < n; ++rank) {
    if (rank != aborter && !mentions(group.value(rank, "error_what").value_or(""), reason)) {
      std::printf("note: rank %d's abort error does not carry the reason: %s\n", rank,
                  group.value(rank, "error_what").value_or("").c_str());
    }
  }
}

// Threads: abort() wakes a waiter blocked on an operation that can never
// complete (a receive nobody sends), on this rank and on the peer.
TEST(Faults, AbortWakesBlockedWaitersThreads) {
  std::atomic<int64_t> abort_ns{0};
  run_comm_threads(2, [&](Communicator& comm) {
    std::vector<uint8_t> buffer(64);
    RecvOptions options;
    options.buffer = buffer.data();
    options.nbytes = buffer.size();
    options.peer = 1 - comm.rank();
    options.tag = 99;  // never sent
    std::thread aborter;
    if (comm.rank() == 0) {
      aborter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        abort_ns = monotonic_ns();
        comm.abort("wake up");
      });
    }
    ErrorInfo info;
    try {
      recv(comm, options).wait();
    } catch (...) {
      info = ErrorInfo::from(std::current_exception());
    }
    const int64_t now = monotonic_ns();
    if (aborter.joinable()) aborter.join();
    EXPECT_EQ(info.kind, "CommError") << "rank " << comm.rank() << ": " << info.describe();
    EXPECT_EQ(info.peer, 0) << "rank " << comm.rank() << ": " << info.describe();
    EXPECT_LE(seconds_between(abort_ns.load(), now), kWithin) << "rank " << comm.rank();
    EXPECT_TRUE(comm.failed());
  }, test_config(kTimeout));
}

// What a rank waits on, read from another thread as a hang report does: the
// operations issued and not finished, oldest first, with their kind, peer,
// tag and size; nothing once they have finished.
TEST(Faults, WaitingOperationsNameWhatARankWaitsOn) {
  std::atomic<bool> reported{false};
  std::vector<std::string> seen;
  run_comm_threads(2, [&](Communicator& comm) {
    std::vector<float> data(1 << 20, 1.0f);
    std::vector<uint8_t> message(1024);
    AllreduceOptions reduce;
    reduce.input = reduce.output = data.data();
    reduce.count = data.size();
    if (comm.rank() == 0) {
      std::thread watcher([&] {
        Stopwatch watch;
        while (seen.size() < 2 && watch.seconds() < 20) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          seen = comm.waiting_operations();
        }
        reported = true;
      });
      RecvOptions receive;
      receive.buffer = message.data();
      receive.nbytes = message.size();
      receive.peer = 1;
      receive.tag = 7;
      const Work received = recv(comm, receive);
      const Work reduced = allreduce(comm, reduce);
      reduced.wait();
      received.wait();
      watcher.join();
      EXPECT_TRUE(comm.waiting_operations().empty());
    } else {
      while (!reported) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      allreduce(comm, reduce).wait();
      SendOptions send_options;
      send_options.buffer = message.data();
      send_options.nbytes = message.size();
      send_options.peer = 0;
      send_options.tag = 7;
      send(comm, send_options).wait();
    }
  });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_NE(seen[0].find("recv from rank 1 "), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("nbytes=1024, tag=7), issued "), std::string::npos) << seen[0];
  EXPECT_NE(seen[1].find("allreduce(count=1048576, dtype=f32, op=sum"), std::string::npos) << seen[1];
  EXPECT_NE(seen[1].find(" s ago"), std::string::npos) << seen[1];
}

// Ranks issue one allreduce with different arguments; every rank must fail
// with an error saying "mismatch" and naming both sides' values.
void expect_mismatch_detected(const std::string& test, const std::function<void(int rank, AllreduceOptions&)>& vary,
                              const std::vector<std::string>& words) {
  const int n = 3;
  ProcessGroup group(n, [&](ProcessContext& context) {
    auto comm = Communicator::create(context.store, context.rank, context.size, test_config(kTimeout));
    std::vector<double> input(1000, 1.0), output(1000, 0.0);  // room for any dtype and count below
    AllreduceOptions options;
    options.input = input.data();
    options.output = output.data();
    vary(context.rank, options);
    const int64_t issued = monotonic_ns();
    context.put("issued_ns", std::to_string(issued));
    try {
      allreduce(*comm, options).wait();
      context.report("the mismatched allreduce succeeded");
      return 1;
    } catch (...) {
      put_error(context, "error", ErrorInfo::from(std::current_exception()), monotonic_ns());
    }
    probe_after_failure(context, *comm);
    return 0;
  }, fault_options());
  const auto& exits = group.wait_all();
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_TRUE(exits[rank].ok()) << test << ": " << exits[rank].describe()
                                  << (group.value(rank, "issued_ns") && !group.value(rank, "error_kind")
                                          ? " (it never returned from Work::wait of the mismatched allreduce)"
                                          : "");
    const std::string kind = group.value(rank, "error_kind").value_or("(none)");
    const std::string what = group.value(rank, "error_what").value_or("");
    EXPECT_TRUE(kind == "CommError" || kind == "Error") << test << " rank " << rank << ": " << kind << ": " << what;
    if (kind == "CommError") {
      const int peer = std::stoi(group.value(rank, "error_peer").value_or("-9"));
      EXPECT_TRUE(peer >= 0 && peer < n) << test << " rank " << rank << " named no rank (" << peer << "): " << what;
    }
    EXPECT_TRUE(mentions(what, "mismatch")) << test << " rank " << rank << ": " << what;
    for (const auto& word : words) EXPECT_TRUE(mentions(what, word)) << test << " rank " << rank << ": " << what;
    const int64_t issued = std::stoll(group.value(rank, "issued_ns").value_or("0"));
    const int64_t failed = std::stoll(group.value(rank, "error_ns").value_or("0"));
    EXPECT_LE(seconds_between(issued, failed), kWithin) << test << " rank " << rank;
    const std::string after = group.value(rank, "after_kind").value_or("(none)");
    EXPECT_TRUE(after == "CommError" || after == "TimeoutError") << test << " rank " << rank << ": after " << after;
    EXPECT_LE(std::stod(group.value(rank, "after_seconds").value_or("99")), 0.5) << test << " rank " << rank;
  }
}

// Ranks that would open different numbers of data sockets per peer (a
// different ccl.tcp.sockets_per_peer, or link models on either side of the
// threshold) fail at once, naming the key, instead of timing out connecting.
TEST(Faults, RanksThatDisagreeOnDataSocketsFailNamingTheKey) {
  auto store = std::make_shared<MemoryStore>();
  run_threads(3, [&](int rank) {
    CommConfig config = test_config(kTimeout);
    if (rank == 2) config.tcp_gbps = 0.001;  // one socket where the others open two
    const int64_t started = monotonic_ns();
    try {
      Communicator::create(store, rank, 3, config);
      ADD_FAILURE() << "rank " << rank << " connected";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "ccl.tcp.sockets_per_peer") << e.what();
      EXPECT_TRUE(mentions(e.what(), "rank 2")) << e.what();
    }
    EXPECT_LE(seconds_between(started, monotonic_ns()), 1.0) << "rank " << rank;
  });
}

TEST(Faults, MismatchedCountsAreDetectedOnEveryRank) {
  expect_mismatch_detected("counts", [](int rank, AllreduceOptions& o) { o.count = rank == 0 ? 1000 : 7; },
                           {"1000", "7"});
}

TEST(Faults, MismatchedDTypesAreDetectedOnEveryRank) {
  expect_mismatch_detected("dtypes", [](int rank, AllreduceOptions& o) {
    o.count = 100;
    o.dtype = rank == 0 ? DType::f32 : DType::i32;
  }, {"f32", "i32"});
}

TEST(Faults, StoreRefusesAWrongSecret) {
  TcpStoreServer server("127.0.0.1", 0, "the-right-secret");
  Stopwatch watch;
  try {
    TcpStore client("127.0.0.1", server.port(), "a-wrong-secret", std::chrono::seconds(5));
    ADD_FAILURE() << "a client with the wrong secret was accepted";
  } catch (const TimeoutError& e) {
    ADD_FAILURE() << "expected a giant::Error about the secret, got a TimeoutError: " << e.what();
  } catch (const Error& e) {
    EXPECT_TRUE(mentions(e.what(), "secret")) << e.what();
  }
  EXPECT_LT(watch.seconds(), 5.0);
  TcpStore good("127.0.0.1", server.port(), "the-right-secret", std::chrono::seconds(5));
  good.set("k", to_bytes("v"));
  EXPECT_EQ(to_string(good.get("k", std::chrono::seconds(5))), "v");
}

int connect_raw(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True when the server closed the connection within the deadline.
bool closed_by_server(int fd, const Deadline& deadline) {
  char buffer[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, deadline.remaining_ms(100)) > 0) {
      ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
      if (got <= 0) return true;
    }
    if (deadline.expired()) return false;
  }
}

TEST(Faults, StoreSurvivesHostileClients) {
  TcpStoreLimits limits;
  limits.handshake_timeout = std::chrono::milliseconds(1000);
  TcpStoreServer server("127.0.0.1", 0, "secret", limits);
  // One client claims a huge length, another connects and says nothing.
  int huge = connect_raw(server.port());
  int silent = connect_raw(server.port());
  ASSERT_GE(huge, 0);
  ASSERT_GE(silent, 0);
  std::vector<uint8_t> junk(64, 0xff);
  ASSERT_EQ(::send(huge, junk.data(), junk.size(), MSG_NOSIGNAL), static_cast<ssize_t>(junk.size()));
  // A legitimate client is served meanwhile.
  Stopwatch watch;
  TcpStore good("127.0.0.1", server.port(), "secret", std::chrono::seconds(5));
  good.set("alive", to_bytes("yes"));
  EXPECT_EQ(to_string(good.get("alive", std::chrono::seconds(5))), "yes");
  EXPECT_LT(watch.seconds(), 2.0) << "the hostile clients held the server up";
  // Both hostile connections are dropped within the handshake timeout (and a margin).
  EXPECT_TRUE(closed_by_server(huge, Deadline::after(std::chrono::seconds(4)))) << "huge-length client kept";
  EXPECT_TRUE(closed_by_server(silent, Deadline::after(std::chrono::seconds(4)))) << "silent client kept";
  ::close(huge);
  ::close(silent);
  EXPECT_EQ(good.add("counter", 5), 5);
}

}  // namespace
}  // namespace giant::ccl::test
