// Ranks on several hosts, simulated by network namespaces joined by veth
// (support/netns.h): each rank enters its host's namespace right after the
// fork, listens on that namespace's address and declares its host id
// ("hostA", "hostB"); the ranks meet through a FileStore on the shared file
// system. Mostly 4 ranks as 2 hosts x 2 (ranks 0, 1 on hostA; 2, 3 on
// hostB): the topology, hierarchical against flat (ring) results, bitwise
// identity on every rank, wire compression, every general check, faults
// across hosts, and a rate-capped link. Skipped where namespaces cannot be
// made (not root, no iproute2); CI runs it as root.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "ccl/support/collective_checks.h"
#include "ccl/support/netns.h"
#include "ccl/support/ranks.h"
#include "giant/base/timer.h"
#include "support/rounding.h"

namespace giant::ccl::test {
namespace {

constexpr int kHosts = 2;
constexpr int kPerHost = 2;
constexpr int kRanks = kHosts * kPerHost;

// One rank's work on its communicator; mismatches go to findings.
using RankBody = std::function<void(ProcessContext& context, Communicator& comm, Findings& findings)>;

// Forks hosts.size() * per_host ranks into their namespaces, each creating
// its communicator and running body, then a barrier (nobody tears down while
// a peer still finishes). Fails the test for every rank with findings.
void run_on_hosts(const NamespaceHosts& hosts, int per_host, const std::string& test, const RankBody& body,
                  const CommConfig& base = test_config()) {
  ProcessOptions options = hosts.process_options(per_host);
  options.deadline = std::chrono::seconds(150);
  const auto exits = run_processes(hosts.size() * per_host, [&](ProcessContext& context) {
    auto comm = Communicator::create(context.store, context.rank, context.size,
                                     hosts.config_of(context.rank, per_host, base));
    Findings findings;
    body(context, *comm, findings);
    run_op("final barrier", findings, [&] { return barrier(*comm); });
    if (!findings.empty()) context.report(test + ":\n" + findings.text());
    return findings.empty() ? 0 : 1;
  }, options);
  expect_all_ok(exits, test);
}

void check_topology(const Communicator& comm, const NamespaceHosts& hosts, int per_host, Findings& findings) {
  const HostTopology& t = comm.topology();
  const std::string name = "topology of rank " + std::to_string(comm.rank());
  std::vector<std::string> ids;
  std::vector<int> host_of_rank, local_ranks;
  for (int h = 0; h < hosts.size(); ++h) ids.push_back(hosts.host_id(h));
  for (int r = 0; r < comm.size(); ++r) host_of_rank.push_back(r / per_host);
  const int host = comm.rank() / per_host;
  for (int r = host * per_host; r < (host + 1) * per_host; ++r) local_ranks.push_back(r);
  if (t.num_hosts() != hosts.size()) findings.add(name + ": num_hosts " + std::to_string(t.num_hosts()));
  if (t.host_ids != ids) findings.add(name + ": host ids are not hostA, hostB, ... in order of first rank");
  if (t.host_of_rank != host_of_rank) findings.add(name + ": wrong host_of_rank");
  if (t.host != host) findings.add(name + ": host " + std::to_string(t.host));
  if (t.local_rank != comm.rank() % per_host) findings.add(name + ": local_rank " + std::to_string(t.local_rank));
  if (t.local_size != per_host) findings.add(name + ": local_size " + std::to_string(t.local_size));
  if (t.local_ranks != local_ranks) findings.add(name + ": wrong local_ranks");
  for (int peer = 0; peer < comm.size(); ++peer) {
    const std::string transport = comm.transport_to(peer);
    if (peer != comm.rank() && !t.same_host(comm.rank(), peer) && transport != "tcp") {
      findings.add(name + ": rank " + std::to_string(peer) + " is on another host but reached by " + transport);
    }
  }
}

TEST(NamespaceHosts, RanksRunInTheirHostsNamespaceAndNothingIsLeftBehind) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  std::vector<std::string> names;
  {
    NamespaceHosts hosts;
    for (int h = 0; h < hosts.size(); ++h) names.push_back(hosts.name(h));
    ProcessGroup group(kRanks, [](ProcessContext& context) {
      char link[128] = {0};
      if (::readlink("/proc/self/ns/net", link, sizeof link - 1) <= 0) return 1;
      context.put("netns", link);
      return 0;
    }, hosts.process_options(kPerHost));
    expect_all_ok(group.wait_all(), "namespaces");
    char here[128] = {0};
    ASSERT_GT(::readlink("/proc/self/ns/net", here, sizeof here - 1), 0);
    std::vector<std::string> seen;
    for (int r = 0; r < kRanks; ++r) seen.push_back(group.value(r, "netns").value_or("rank " + std::to_string(r)));
    EXPECT_EQ(seen[0], seen[1]);
    EXPECT_EQ(seen[2], seen[3]);
    EXPECT_NE(seen[0], seen[2]);
    EXPECT_NE(seen[0], std::string(here));
    EXPECT_NE(seen[2], std::string(here));
  }
  for (const auto& name : names) {
    EXPECT_NE(::access(("/var/run/netns/" + name).c_str(), F_OK), 0) << name << " was not deleted";
  }
}

TEST(MultiHost, TopologyFromDeclaredHostIds) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHosts hosts;
  run_on_hosts(hosts, kPerHost, "topology", [&](ProcessContext& context, Communicator& comm, Findings& findings) {
    check_topology(comm, hosts, kPerHost, findings);
    std::string transports;
    for (int peer = 0; peer < comm.size(); ++peer) transports += " " + comm.transport_to(peer);
    context.put("transports", transports);
  });
}

// --- hierarchical against flat, on exact inputs -----------------------------

struct ExactCase {
  DType dtype;
  ReduceOp op;
  size_t count;
  bool in_place;
};

std::vector<ExactCase> exact_cases() {
  std::vector<ExactCase> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}})
    for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::bf16})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg})
        if (op != ReduceOp::avg || is_floating(dtype))
          for (bool in_place : {false, true}) cases.push_back({dtype, op, count, in_place});
  cases.push_back({DType::f32, ReduceOp::sum, kBigCount, false});
  cases.push_back({DType::f32, ReduceOp::sum, kBigCount, true});
  cases.push_back({DType::f64, ReduceOp::avg, kBigCount, false});
  cases.push_back({DType::i32, ReduceOp::max, kBigCount, false});
  cases.push_back({DType::bf16, ReduceOp::sum, kBigCount, false});
  return cases;
}

std::string describe(const char* collective, const Communicator& comm, const ExactCase& c, Algorithm algorithm) {
  return case_name(collective, comm, c.dtype, c.count, c.in_place,
                   std::string("op=") + reduce_op_name(c.op) + " algorithm=" + algorithm_name(algorithm));
}

uint32_t salt_of(const ExactCase& c, int collective) {
  return static_cast<uint32_t>(c.count * 131 + static_cast<int>(c.op) * 17 + static_cast<int>(c.dtype) * 5 +
                               collective * 1009 + (c.in_place ? 7 : 0));
}

// The result of one operation; empty when it failed (recorded in findings).
using Result = std::optional<Buffer>;

Result exact_allreduce(Communicator& comm, const ExactCase& c, Algorithm algorithm, Findings& findings) {
  const uint32_t salt = salt_of(c, 0);
  Buffer input(c.dtype, c.count), output(c.dtype, c.count);
  input.fill([&](size_t i) { return reduction_input(c.dtype, c.op, comm.rank(), i, salt); });
  AllreduceOptions o;
  o.input = input.data();
  o.output = c.in_place ? input.data() : output.data();
  o.count = c.count;
  o.dtype = c.dtype;
  o.op = c.op;
  o.algorithm = algorithm;
  const std::string name = describe("allreduce", comm, c, algorithm);
  if (!run_op(name, findings, [&] { return allreduce(comm, o); })) return std::nullopt;
  Buffer& result = c.in_place ? input : output;
  compare(result, 0, c.count, [&](size_t i) { return reduction_expected(c.dtype, c.op, comm.size(), i, salt); },
          c.op == ReduceOp::avg, name, findings);
  return std::move(result);
}

Result exact_reduce_scatter(Communicator& comm, const ExactCase& c, Algorithm algorithm, Findings& findings) {
  const uint32_t salt = salt_of(c, 1);
  const size_t n = static_cast<size_t>(comm.size());
  Buffer input(c.dtype, c.count * n), output(c.dtype, c.count);
  input.fill([&](size_t j) { return reduction_input(c.dtype, c.op, comm.rank(), j, salt); });
  ReduceScatterOptions o;
  o.input = input.data();
  o.output = c.in_place ? input.data() : output.data();  // in place: block 0 gets the result
  o.count = c.count;
  o.dtype = c.dtype;
  o.op = c.op;
  o.algorithm = algorithm;
  const std::string name = describe("reduce_scatter", comm, c, algorithm);
  if (!run_op(name, findings, [&] { return reduce_scatter(comm, o); })) return std::nullopt;
  Buffer result(c.dtype, c.count);
  if (c.count > 0) std::memcpy(result.data(), c.in_place ? input.data() : output.data(), result.nbytes());
  compare(result, 0, c.count,
          [&](size_t i) { return reduction_expected(c.dtype, c.op, comm.size(), comm.rank() * c.count + i, salt); },
          c.op == ReduceOp::avg, name, findings);
  return result;
}

Result exact_allgather(Communicator& comm, const ExactCase& c, Algorithm algorithm, Findings& findings) {
  const uint32_t salt = salt_of(c, 2);
  const size_t n = static_cast<size_t>(comm.size());
  Buffer input(c.dtype, c.count), output(c.dtype, c.count * n);
  input.fill([&](size_t i) { return movement_input(comm.rank(), i, salt); });
  AllgatherOptions o;
  if (c.in_place) {  // this rank's block of the output already holds its input
    if (c.count > 0) std::memcpy(output.at(comm.rank() * c.count), input.data(), input.nbytes());
    o.input = output.at(comm.rank() * c.count);
  } else {
    o.input = input.data();
  }
  o.output = output.data();
  o.count = c.count;
  o.dtype = c.dtype;
  o.algorithm = algorithm;
  const std::string name = describe("allgather", comm, c, algorithm);
  if (!run_op(name, findings, [&] { return allgather(comm, o); })) return std::nullopt;
  compare(output, 0, c.count * n,
          [&](size_t j) { return movement_input(static_cast<int>(j / c.count), j % c.count, salt); }, false, name,
          findings);
  return output;
}

TEST(MultiHost, HierarchicalEqualsFlatBitwiseOnExactInputs) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHosts hosts;
  using Runner = Result (*)(Communicator&, const ExactCase&, Algorithm, Findings&);
  const std::pair<const char*, Runner> collectives[] = {
      {"allreduce", exact_allreduce}, {"reduce_scatter", exact_reduce_scatter}, {"allgather", exact_allgather}};
  run_on_hosts(hosts, kPerHost, "hierarchical vs ring", [&](ProcessContext&, Communicator& comm, Findings& findings) {
    check_topology(comm, hosts, kPerHost, findings);
    for (const auto& [collective, run] : collectives) {
      for (const ExactCase& c : exact_cases()) {
        if (std::string(collective) == "allgather" && c.op != ReduceOp::sum) continue;  // no op: once per dtype
        Result flat = run(comm, c, Algorithm::ring, findings);
        Result hierarchical = run(comm, c, Algorithm::hierarchical, findings);
        if (flat && hierarchical && flat->bytes() != hierarchical->bytes()) {
          findings.add(describe(collective, comm, c, Algorithm::hierarchical) + ": differs bitwise from the ring's");
        }
      }
    }
  });
}

// --- bitwise identity on every rank, on random floats -----------------------

// Random non-integer values of the dtype in [-2, 2].
Buffer random_values(DType dtype, size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> uniform(-2.0, 2.0);
  Buffer buffer(dtype, count);
  for (size_t i = 0; i < count; ++i) buffer.set(i, uniform(generator));
  return buffer;
}

// Gathers every rank's hash of its result (with the ring) and records the
// ranks whose result differs from this one's.
void expect_same_everywhere(Communicator& comm, const Buffer& result, const std::string& name, Findings& findings) {
  uint64_t hash = fnv1a(result.data(), result.nbytes());
  std::vector<uint64_t> hashes(comm.size(), 0);
  AllgatherOptions o;
  o.input = &hash;
  o.output = hashes.data();
  o.count = 1;
  o.dtype = DType::i64;  // the hash's bits
  o.algorithm = Algorithm::ring;
  if (!run_op(name + " (gathering hashes)", findings, [&] { return allgather(comm, o); })) return;
  std::string differing;
  for (int r = 0; r < comm.size(); ++r)
    if (hashes[r] != hash) differing += " " + std::to_string(r);
  if (!differing.empty()) findings.add(name + ": result differs bitwise from that of rank(s)" + differing);
}

// Allreduces every rank's random values with `options` (input, output and
// count filled in here) and checks the result is the same on every rank and
// within `relative_error` of the exact sum (scaled by the sum of magnitudes).
void random_allreduce(Communicator& comm, AllreduceOptions o, size_t count, bool in_place, double relative_error,
                      Findings& findings) {
  const int n = comm.size();
  const uint32_t salt = static_cast<uint32_t>(count * 31 + static_cast<int>(o.dtype) * 7 + static_cast<int>(o.op));
  auto input_of = [&](int r) { return random_values(o.dtype, count, 7919u * (r + 1) + salt); };
  Buffer input = input_of(comm.rank());
  Buffer output(o.dtype, count);
  o.input = input.data();
  o.output = in_place ? input.data() : output.data();
  o.count = count;
  const std::string name =
      case_name("allreduce (random floats)", comm, o.dtype, count, in_place,
                std::string("op=") + reduce_op_name(o.op) + " algorithm=" + algorithm_name(o.algorithm) +
                    " wire=" + wire_dtype_name(o.wire));
  if (!run_op(name, findings, [&] { return allreduce(comm, o); })) return;
  const Buffer& result = in_place ? input : output;
  expect_same_everywhere(comm, result, name, findings);
  std::vector<double> exact(count, o.op == ReduceOp::max ? -INFINITY : 0.0), magnitude(count, 0.0);
  for (int r = 0; r < n; ++r) {
    Buffer theirs = input_of(r);
    for (size_t i = 0; i < count; ++i) {
      exact[i] = o.op == ReduceOp::max ? std::max(exact[i], theirs.get(i)) : exact[i] + theirs.get(i);
      magnitude[i] += std::fabs(theirs.get(i));
    }
  }
  const double divisor = o.op == ReduceOp::avg ? n : 1;
  for (size_t i = 0; i < count; ++i) {
    const double want = exact[i] / divisor;
    const double tolerance = o.op == ReduceOp::max ? 0 : (relative_error * magnitude[i] + 2 * n * ulp(o.dtype, 2.0 * n)) / divisor;
    if (!(std::fabs(result.get(i) - want) <= tolerance)) {
      findings.add(name + ": element " + std::to_string(i) + " is " + std::to_string(result.get(i)) +
                   ", far from the exact " + std::to_string(want));
      break;
    }
  }
}

TEST(MultiHost, HierarchicalResultsAreBitwiseIdenticalOnEveryRank) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHosts hosts;
  run_on_hosts(hosts, kPerHost, "random floats", [&](ProcessContext&, Communicator& comm, Findings& findings) {
    const int n = comm.size();
    AllreduceOptions o;
    o.algorithm = Algorithm::hierarchical;
    for (DType dtype : {DType::f32, DType::f64, DType::bf16})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
        for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{70001}})
          for (bool in_place : {false, true}) {
            o.dtype = dtype;
            o.op = op;
            random_allreduce(comm, o, count, in_place, 0, findings);
          }
    o.dtype = DType::f32;
    o.op = ReduceOp::sum;
    random_allreduce(comm, o, kBigCount, false, 0, findings);
    // reduce_scatter: every block is the same whichever rank computes it, so
    // a repeat gives the same bits; allgather: every rank gets every input.
    for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
      for (size_t count : {size_t{1}, size_t{1001}, size_t{70001}}) {
        Buffer input = random_values(dtype, count * n, 31u * comm.rank() + static_cast<uint32_t>(count));
        Buffer first(dtype, count), second(dtype, count);
        ReduceScatterOptions rs;
        rs.input = input.data();
        rs.count = count;
        rs.dtype = dtype;
        rs.algorithm = Algorithm::hierarchical;
        const std::string name = case_name("reduce_scatter (random floats, twice)", comm, dtype, count, false,
                                           "algorithm=hierarchical");
        rs.output = first.data();
        if (!run_op(name, findings, [&] { return reduce_scatter(comm, rs); })) continue;
        rs.output = second.data();
        if (!run_op(name, findings, [&] { return reduce_scatter(comm, rs); })) continue;
        if (first.bytes() != second.bytes()) findings.add(name + ": the two results differ bitwise");

        Buffer gathered(dtype, count * n);
        AllgatherOptions ag;
        ag.input = first.data();
        ag.output = gathered.data();
        ag.count = count;
        ag.dtype = dtype;
        ag.algorithm = Algorithm::hierarchical;
        const std::string ag_name = case_name("allgather (random floats)", comm, dtype, count, false,
                                              "algorithm=hierarchical");
        if (!run_op(ag_name, findings, [&] { return allgather(comm, ag); })) continue;
        if (std::memcmp(gathered.at(comm.rank() * count), first.data(), first.nbytes()) != 0) {
          findings.add(ag_name + ": this rank's block is not its input");
        }
        expect_same_everywhere(comm, gathered, ag_name, findings);
      }
    }
  });
}

TEST(MultiHost, HierarchicalWithBf16WireIsBitwiseIdenticalOnEveryRank) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHosts hosts;
  run_on_hosts(hosts, kPerHost, "bf16 wire", [&](ProcessContext&, Communicator& comm, Findings& findings) {
    // One bf16 rounding (at most u = 2^-8 relative) per hop of the
    // reduction, fewer hops than ranks: gamma_n of bf16 (support/rounding.h).
    const double relative_error = giant::test::gamma(comm.size(), giant::test::unit_roundoff(Precision::bf16));
    AllreduceOptions o;
    o.algorithm = Algorithm::hierarchical;
    o.wire = WireDType::bf16;
    for (DType dtype : {DType::f32})  // wire compression takes f32 data only
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
        for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{70001}})
          for (bool in_place : {false, true}) {
            o.dtype = dtype;
            o.op = op;
            random_allreduce(comm, o, count, in_place, relative_error, findings);
          }
    o.dtype = DType::f32;
    o.op = ReduceOp::sum;
    random_allreduce(comm, o, kBigCount, false, relative_error, findings);
  });
}

TEST(MultiHost, EveryCollectiveWithAutomaticAlgorithms) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHosts hosts;
  run_on_hosts(hosts, kPerHost, "all checks", [&](ProcessContext& context, Communicator& comm, Findings& findings) {
    CollectivePlan plan;
    plan.algorithms = {Algorithm::automatic};
    plan.store = context.store;
    plan.store_prefix = "multihost";
    for (const NamedCheck& check : all_checks()) {
      Findings found;
      Stopwatch watch;
      check.function(comm, plan, found);
      if (comm.rank() == 0) std::printf("all checks on 2x2: %s took %.2f s on rank 0\n", check.name, watch.seconds());
      if (!found.empty()) findings.add(std::string(check.name) + ":\n" + found.text());
    }
  });
}

// --- faults across hosts ----------------------------------------------------

constexpr auto kTimeout = std::chrono::milliseconds(2000);
// "Within twice the timeout", plus a margin for 4 ranks on 2 busy cores.
constexpr double kWithin = 2 * 2.0 + 0.5;
constexpr size_t kLoopCount = (16 << 20) / 4;  // 16 MiB of f32

// Loops allreduces until one fails; puts "running" after the first, then the
// error, then how a next operation fails.
ProcessBody allreduce_loop(const NamespaceHosts& hosts, Algorithm algorithm) {
  return [&hosts, algorithm](ProcessContext& context) {
    auto comm = Communicator::create(context.store, context.rank, context.size,
                                     hosts.config_of(context.rank, kPerHost, test_config(kTimeout)));
    std::vector<float> input(kLoopCount, 1.0f), output(kLoopCount, 0.0f);
    AllreduceOptions o;
    o.input = input.data();
    o.output = output.data();
    o.count = kLoopCount;
    o.algorithm = algorithm;
    try {
      for (int iteration = 0; iteration < 100000; ++iteration) {
        allreduce(*comm, o).wait();
        if (iteration == 0) context.put("running");
      }
      context.report("the allreduce loop ended without an error");
      return 1;
    } catch (...) {
      const ErrorInfo info = ErrorInfo::from(std::current_exception());
      const int64_t now = monotonic_ns();
      context.put("error_kind", info.kind);
      context.put("error_peer", std::to_string(info.peer));
      context.put("error_what", info.what);
      context.put("error_ns", std::to_string(now));
    }
    ErrorInfo after;
    const int64_t start = monotonic_ns();
    try {
      allreduce(*comm, o).wait();
    } catch (...) {
      after = ErrorInfo::from(std::current_exception());
    }
    context.put("after_kind", after.kind);
    context.put("after_seconds", std::to_string(seconds_between(start, monotonic_ns())));
    return 0;
  };
}

void expect_survivor(ProcessGroup& group, int rank, int64_t event_ns, const std::string& kind, int culprit,
                     const std::string& test) {
  const RankExit& e = group.wait_all()[rank];
  EXPECT_TRUE(e.ok()) << test << ": " << e.describe();
  const std::string what = group.value(rank, "error_what").value_or("");
  EXPECT_EQ(group.value(rank, "error_kind").value_or("(none reported)"), kind) << test << " rank " << rank << ": " << what;
  EXPECT_EQ(std::stoi(group.value(rank, "error_peer").value_or("-9")), culprit)
      << test << " rank " << rank << " blamed the wrong peer: " << what;
  const double seconds = seconds_between(event_ns, std::stoll(group.value(rank, "error_ns").value_or("0")));
  EXPECT_GE(seconds, 0.0) << test << " rank " << rank << " failed before the fault: " << what;
  EXPECT_LE(seconds, kWithin) << test << " rank " << rank << " failed too late: " << what;
  const std::string after = group.value(rank, "after_kind").value_or("(none)");
  EXPECT_TRUE(after == "CommError" || after == "TimeoutError")
      << test << " rank " << rank << ": an operation after the failure gave " << after;
  EXPECT_LE(std::stod(group.value(rank, "after_seconds").value_or("99")), 0.5)
      << test << " rank " << rank << ": an operation after the failure did not fail at once";
}

ProcessOptions fault_options(const NamespaceHosts& hosts) {
  ProcessOptions options = hosts.process_options(kPerHost);
  options.deadline = std::chrono::seconds(40);
  return options;
}

void wait_until_all_running(ProcessGroup& group) {
  for (int rank = 0; rank < group.size(); ++rank) {
    ASSERT_TRUE(group.wait_for(rank, "running", Deadline::after(std::chrono::seconds(30))))
        << "rank " << rank << " never completed its first allreduce: " << group.wait_all()[rank].describe();
  }
}

class MultiHostFaults : public ::testing::TestWithParam<Algorithm> {};

TEST_P(MultiHostFaults, KilledRankIsNamedByEverySurvivor) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHosts hosts;
  const int victim = 3;
  const std::string test = std::string("SIGKILL rank 3 of 2x2, ") + algorithm_name(GetParam());
  ProcessGroup group(kRanks, allreduce_loop(hosts, GetParam()), fault_options(hosts));
  wait_until_all_running(group);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // well inside some allreduce
  const int64_t kill_ns = monotonic_ns();
  group.signal(victim, SIGKILL);
  const auto& exits = group.wait_all();
  EXPECT_EQ(exits[victim].term_signal, SIGKILL) << exits[victim].describe();
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank != victim) expect_survivor(group, rank, kill_ns, "CommError", victim, test);
  }
}

TEST_P(MultiHostFaults, StoppedRankTimesOutEverySurvivor) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHosts hosts;
  const int victim = 2;
  const std::string test = std::string("SIGSTOP rank 2 of 2x2, ") + algorithm_name(GetParam());
  ProcessGroup group(kRanks, allreduce_loop(hosts, GetParam()), fault_options(hosts));
  wait_until_all_running(group);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const int64_t stop_ns = monotonic_ns();
  group.signal(victim, SIGSTOP);
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank != victim) group.wait_rank(rank, Deadline::after(std::chrono::seconds(20)));
  }
  group.signal(victim, SIGCONT);  // let it notice on its own, or kill it
  if (!group.wait_rank(victim, Deadline::after(std::chrono::seconds(10)))) group.kill_rank(victim);
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank != victim) expect_survivor(group, rank, stop_ns, "TimeoutError", victim, test);
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, MultiHostFaults, ::testing::Values(Algorithm::ring, Algorithm::hierarchical),
                         [](const ::testing::TestParamInfo<Algorithm>& info) {
                           return std::string(algorithm_name(info.param));
                         });

// --- a rate-capped link -------------------------------------------------------

TEST(MultiHost, RateCappedLinkGivesCorrectResults) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHostsOptions options;
  options.rate = "200mbit";
  NamespaceHosts hosts(options);
  run_on_hosts(hosts, 1, "200mbit link", [&](ProcessContext&, Communicator& comm, Findings& findings) {
    for (Algorithm algorithm : {Algorithm::ring, Algorithm::automatic, Algorithm::hierarchical}) {
      const ExactCase c{DType::f32, ReduceOp::sum, (4 << 20) / 4, false};  // 4 MiB
      Stopwatch watch;
      exact_allreduce(comm, c, algorithm, findings);
      // For the log only: speed is for benchmarks to check, never unit tests.
      if (comm.rank() == 0) {
        std::printf("4 MiB allreduce over a 200mbit link, %s: %.3f s\n", algorithm_name(algorithm), watch.seconds());
      }
    }
  });
}

// A link slow one way: host A's sends crawl while host B's arrive at once,
// so A's ranks have everything they receive while their last sends are still
// reading their buffers. Whatever the algorithm does to the result next (the
// average) must wait for those sends, or B receives it half-done.
TEST(MultiHost, AverageWaitsForTheSendsOfASlowLink) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHostsOptions options;
  options.host_rates = {"200mbit", ""};
  NamespaceHosts hosts(options);
  run_on_hosts(hosts, kPerHost, "one-way slow link", [&](ProcessContext&, Communicator& comm, Findings& findings) {
    // 32 MiB in engine chunks of 8 MiB: in each, host A's ring sends are still
    // queued behind the slow link when its receives are done.
    const ExactCase c{DType::f32, ReduceOp::avg, (32 << 20) / 4, false};
    for (Algorithm algorithm : {Algorithm::hierarchical, Algorithm::ring}) exact_allreduce(comm, c, algorithm, findings);
  });
}

// More than two hosts are joined by a bridge (capped on every port too).
TEST(MultiHost, ThreeHostsJoinedByABridge) {
  GIANT_SKIP_WITHOUT_NAMESPACES();
  NamespaceHostsOptions options;
  options.hosts = 3;
  options.rate = "1gbit";
  NamespaceHosts hosts(options);
  run_on_hosts(hosts, 1, "3 hosts", [&](ProcessContext&, Communicator& comm, Findings& findings) {
    check_topology(comm, hosts, 1, findings);
    for (size_t count : {size_t{7}, size_t{100000}}) {
      exact_allreduce(comm, {DType::f32, ReduceOp::sum, count, false}, Algorithm::ring, findings);
      exact_allgather(comm, {DType::i32, ReduceOp::sum, count, true}, Algorithm::ring, findings);
    }
  });
}

}  // namespace
}  // namespace giant::ccl::test
