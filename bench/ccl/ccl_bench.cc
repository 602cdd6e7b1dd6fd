// `giant bench ccl`: bandwidth and correctness of ccl's collectives, in the
// style of nccl-tests. The parent serves a TcpStore on 127.0.0.1 and forks one
// process per rank (or, with --launched, a launcher such as `giant launch`
// started the ranks, and ccl's bootstrap finds the store); every rank runs
// each collective at each size (warmup, then timed iterations, each waited
// for before the next), and rank 0 prints one table per collective plus one
// key=value line per row, which names the transport of every peer pair. The
// time of a row is the slowest rank's mean. Every result is checked against
// the exact expected values (with --wire, against the wire dtype's stated
// bound); any wrong element or failed rank makes the exit non-zero.
//
// See `giant bench ccl --help` (ccl_bench_options.cc) for the flags. Sizes follow nccl-tests:
// S is the whole buffer (allreduce, broadcast, reduce, send/recv: each rank's
// buffer; reduce_scatter and scatter: the input of size() blocks; allgather
// and gather: the output of size() blocks; alltoall: each rank's input),
// rounded down to whole elements per rank (at least one).

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ccl_bench.h"

#include "bench_common.h"
#include "ccl_bench_options.h"
#include "transport_pairs.h"
#include "element_values.h"
#include "giant/base/statistics.h"
#include "giant/base/tunables.h"
#include "giant/ccl/bootstrap.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/cost_model.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/config.h"
#include "giant/ccl/store.h"
#include "giant/ccl/types.h"

namespace giant::bench {
namespace {

using ccl::Algorithm;
using ccl::Communicator;

// Element counts of one collective at one nominal size.
struct Layout {
  size_t block = 0;         // elements per rank block (blocked collectives) or the whole count
  size_t input_count = 0;   // elements in this rank's input
  size_t output_count = 0;  // elements in this rank's output
  size_t total_count = 0;   // elements in S, the size that bandwidth is computed from
};

Layout layout_for(Collective c, int64_t nominal_bytes, int nproc, size_t element_size) {
  const size_t n = static_cast<size_t>(nproc);
  const size_t elements = std::max<size_t>(1, static_cast<size_t>(nominal_bytes) / element_size);
  const size_t block = std::max<size_t>(1, elements / n);
  switch (c) {
    case Collective::allreduce:
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::sendrecv: return {elements, elements, elements, elements};
    case Collective::reduce_scatter:
    case Collective::scatter: return {block, n * block, block, n * block};
    case Collective::allgather:
    case Collective::gather: return {block, block, n * block, n * block};
    case Collective::alltoall: return {block, n * block, n * block, n * block};
  }
  return {};
}

// What one rank holds while it benchmarks.
struct RankContext {
  const Options& options;
  Communicator& comm;
  int rank;
  int nproc;
  size_t element_size;
  std::vector<uint8_t> input;
  std::vector<uint8_t> output;
  std::string transport_pairs;  // "0-1:shm,0-2:tcp,...", "-" for one rank
  std::string transport_kinds;  // the distinct transports, "shm+tcp"
  int64_t wrong = 0;            // this rank's wrong elements so far
  int64_t total_wrong = 0;      // over all ranks (known on every rank)
};

// Issues one operation and waits for it; sendrecv waits for both halves.
void run_once(RankContext& ctx, Collective c, const Layout& layout) {
  const Options& o = ctx.options;
  const void* in = ctx.input.data();
  void* out = ctx.output.data();
  switch (c) {
    case Collective::allreduce: {
      ccl::AllreduceOptions a;
      a.input = in, a.output = out, a.count = layout.block, a.dtype = o.dtype, a.op = o.op;
      a.algorithm = o.algorithm;
      a.wire = o.wire;
      ccl::allreduce(ctx.comm, a).wait();
      return;
    }
    case Collective::reduce_scatter: {
      ccl::ReduceScatterOptions a;
      a.input = in, a.output = out, a.count = layout.block, a.dtype = o.dtype, a.op = o.op;
      ccl::reduce_scatter(ctx.comm, a).wait();
      return;
    }
    case Collective::allgather: {
      ccl::AllgatherOptions a;
      a.input = in, a.output = out, a.count = layout.block, a.dtype = o.dtype;
      ccl::allgather(ctx.comm, a).wait();
      return;
    }
    case Collective::alltoall: {
      ccl::AlltoallOptions a;
      a.input = in, a.output = out, a.count = layout.block, a.dtype = o.dtype;
      ccl::alltoall(ctx.comm, a).wait();
      return;
    }
    case Collective::broadcast: {
      ccl::BroadcastOptions a;
      a.input = in, a.output = out, a.count = layout.block, a.dtype = o.dtype, a.root = o.root;
      ccl::broadcast(ctx.comm, a).wait();
      return;
    }
    case Collective::reduce: {
      ccl::ReduceOptions a;
      a.input = in, a.output = out, a.count = layout.block, a.dtype = o.dtype, a.op = o.op;
      a.root = o.root;
      ccl::reduce(ctx.comm, a).wait();
      return;
    }
    case Collective::gather: {
      ccl::GatherOptions a;
      a.input = in, a.output = out, a.count = layout.block, a.dtype = o.dtype, a.root = o.root;
      ccl::gather(ctx.comm, a).wait();
      return;
    }
    case Collective::scatter: {
      ccl::ScatterOptions a;
      a.input = in, a.output = out, a.count = layout.block, a.dtype = o.dtype, a.root = o.root;
      ccl::scatter(ctx.comm, a).wait();
      return;
    }
    case Collective::sendrecv: {
      // Receive posted first, so the ring cannot wait on itself.
      const size_t nbytes = layout.block * ctx.element_size;
      ccl::RecvOptions r;
      r.buffer = out, r.nbytes = nbytes, r.peer = (ctx.rank + ctx.nproc - 1) % ctx.nproc;
      ccl::SendOptions s;
      s.buffer = in, s.nbytes = nbytes, s.peer = (ctx.rank + 1) % ctx.nproc;
      ccl::Work received = ccl::recv(ctx.comm, r);
      ccl::Work sent = ccl::send(ctx.comm, s);
      sent.wait();
      received.wait();
      return;
    }
  }
}

// Wrong elements in this rank's output after `c` ran on inputs from fill_input.
// With a wire dtype (allreduce only) an element is wrong when its error
// exceeds the stated bound; the largest relative error goes to
// *max_relative_error.
int64_t count_wrong(const RankContext& ctx, Collective c, const Layout& layout, const InputPattern& pattern,
                    double* max_relative_error) {
  const ElementChecker checker(ctx.options.dtype, ctx.options.op);
  *max_relative_error = 0;
  if (ctx.options.wire != ccl::WireDType::none && c == Collective::allreduce) {
    const double bound = wire_relative_bound(ctx.options.wire, ctx.nproc);
    int64_t wrong = 0;
    for (size_t i = 0; i < layout.output_count; ++i) {
      double error = checker.relative_error(ctx.output.data(), i, pattern.reduced(i), pattern.magnitude(i));
      *max_relative_error = std::max(*max_relative_error, error);
      wrong += !(error <= bound);
    }
    return wrong;
  }
  const void* out = ctx.output.data();
  const int root = ctx.options.root;
  const size_t block = layout.block;
  const size_t rank = static_cast<size_t>(ctx.rank);
  int64_t wrong = 0;
  auto check = [&](size_t index, double expected) { wrong += !checker.matches(out, index, expected); };
  switch (c) {
    case Collective::reduce:
      if (ctx.rank != root) break;
      [[fallthrough]];
    case Collective::allreduce:
      for (size_t i = 0; i < layout.output_count; ++i) check(i, pattern.reduced(i));
      break;
    case Collective::reduce_scatter:
      for (size_t k = 0; k < block; ++k) check(k, pattern.reduced(rank * block + k));
      break;
    case Collective::gather:
      if (ctx.rank != root) break;
      [[fallthrough]];
    case Collective::allgather:
      for (int from = 0; from < ctx.nproc; ++from)
        for (size_t k = 0; k < block; ++k) check(from * block + k, pattern.value(from, k));
      break;
    case Collective::alltoall:
      for (int from = 0; from < ctx.nproc; ++from)
        for (size_t k = 0; k < block; ++k) check(from * block + k, pattern.value(from, rank * block + k));
      break;
    case Collective::broadcast:
      for (size_t i = 0; i < layout.output_count; ++i) check(i, pattern.value(root, i));
      break;
    case Collective::scatter:
      for (size_t k = 0; k < block; ++k) check(k, pattern.value(root, rank * block + k));
      break;
    case Collective::sendrecv: {
      int from = (ctx.rank + ctx.nproc - 1) % ctx.nproc;
      for (size_t i = 0; i < layout.output_count; ++i) check(i, pattern.value(from, i));
      break;
    }
  }
  return wrong;
}

double allreduce_scalar(Communicator& comm, double value, ccl::ReduceOp op) {
  ccl::AllreduceOptions a;
  a.input = &value, a.output = &value, a.count = 1, a.dtype = ccl::DType::f64, a.op = op;
  ccl::allreduce(comm, a).wait();
  return value;
}

// The algorithm `automatic` runs (ccl/algorithm_choice.h: the cheapest by
// the alpha-beta costs of ccl.model.*).
Algorithm resolved_algorithm(ccl::Communicator& comm, Algorithm requested, int64_t bytes) {
  if (requested != Algorithm::automatic) return requested;
  return ccl::choose_allreduce_algorithm(comm, static_cast<size_t>(bytes));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Warms up, sizes the iteration count (the same on every rank, from the
// slowest) and times each repetition: the slowest rank's mean in us.
std::vector<double> time_repetitions(RankContext& ctx, Collective c, const Layout& layout, int* iters_out) {
  const Options& o = ctx.options;
  double last_warmup = 0;
  for (int i = 0; i < o.warmup; ++i) {
    auto start = std::chrono::steady_clock::now();
    run_once(ctx, c, layout);
    last_warmup = seconds_since(start);
  }
  int iters = o.iters;
  if (iters == 0) {
    double estimate = allreduce_scalar(ctx.comm, last_warmup, ccl::ReduceOp::max);
    double wanted = estimate > 0 ? std::ceil(o.budget_seconds / estimate) : o.max_iters;
    iters = static_cast<int>(std::clamp<double>(wanted, o.min_iters, o.max_iters));
  }
  std::vector<double> rep_times_us;
  for (int rep = 0; rep < o.repeat; ++rep) {
    ccl::barrier(ctx.comm).wait();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) run_once(ctx, c, layout);
    double mean = seconds_since(start) / iters;
    rep_times_us.push_back(allreduce_scalar(ctx.comm, mean, ccl::ReduceOp::max) * 1e6);
  }
  *iters_out = iters;
  return rep_times_us;
}

// What one size measured, for rank 0's rows.
struct SizeResult {
  int iters = 0;
  std::vector<double> rep_times_us;
  int64_t total_wrong = 0;
  double max_relative_error = 0;  // with a wire dtype
  bool wire = false;
};

// Rank 0's rows: one per repetition, and their median when there are several.
void report_size(const RankContext& ctx, Collective c, const Layout& layout, const SizeResult& r) {
  const Options& o = ctx.options;
  Measurement m;
  m.bench = "ccl";
  m.collective = collective_name(c);
  m.nproc = ctx.nproc;
  m.bytes = static_cast<int64_t>(layout.total_count * ctx.element_size);
  m.count = static_cast<int64_t>(layout.total_count);
  m.dtype = ccl::dtype_name(o.dtype);
  m.op = is_reduction(c) ? ccl::reduce_op_name(o.op) : "-";
  m.root = is_rooted(c) ? o.root : -1;
  m.iters = r.iters;
  m.wrong = r.total_wrong;
  // The distinct transports here, every pair's in `transports`, so parsers need not guess.
  m.transport = ctx.transport_kinds;
  m.extra = {{"sockets", std::to_string(ctx.comm.config().sockets_per_peer)}};
  if (c == Collective::allreduce) {
    m.algorithm = ccl::algorithm_name(resolved_algorithm(ctx.comm, o.algorithm, m.bytes));
    m.extra.emplace_back("algorithm_requested", ccl::algorithm_name(o.algorithm));
  }
  m.extra.emplace_back("transports", ctx.transport_pairs);
  if (r.wire) {
    // bytes (and so busbw) are those of the uncompressed data: the effective bandwidth.
    char text[32];
    m.extra.emplace_back("wire", ccl::wire_dtype_name(o.wire));
    std::snprintf(text, sizeof text, "%.3g", r.max_relative_error);
    m.extra.emplace_back("wire_max_rel_error", text);
    std::snprintf(text, sizeof text, "%.3g", wire_relative_bound(o.wire, ctx.nproc));
    m.extra.emplace_back("wire_bound", text);
  }
  for (int rep = 0; rep < o.repeat; ++rep) {
    m.rep = rep;
    m.time_us = r.rep_times_us[rep];
    print_measurement(m);
  }
  if (o.repeat > 1) {
    m.rep = -1;
    m.time_us = median(r.rep_times_us);
    m.extra.emplace_back("stat", "median");
    print_measurement(m);
  }
}

// One row (or R rows) of the table: fill, warm up, time, check, report.
// Adds the wrong elements of this rank and of all ranks to ctx.
void run_size(RankContext& ctx, Collective c, const Layout& layout) {
  const Options& o = ctx.options;
  SizeResult r;
  // With a wire dtype the inputs are off the integers (by 1/3), so compression rounds.
  r.wire = o.wire != ccl::WireDType::none && c == Collective::allreduce;
  const InputPattern pattern(o.op, ctx.nproc, r.wire ? 1.0 / 3 : 0.0);
  for (size_t i = 0; i < layout.input_count; ++i)
    store_element(o.dtype, ctx.input.data(), i, pattern.value(ctx.rank, i));
  // A sentinel (NaN, or all ones for integers) so that unwritten output is wrong.
  std::fill_n(ctx.output.begin(), layout.output_count * ctx.element_size, uint8_t{0xff});
  r.rep_times_us = time_repetitions(ctx, c, layout, &r.iters);
  // Every iteration writes the same result, so the last one is checked.
  const int64_t wrong = count_wrong(ctx, c, layout, pattern, &r.max_relative_error);
  r.total_wrong = static_cast<int64_t>(allreduce_scalar(ctx.comm, static_cast<double>(wrong), ccl::ReduceOp::sum));
  ctx.wrong += wrong;
  ctx.total_wrong += r.total_wrong;
  if (r.wire) r.max_relative_error = allreduce_scalar(ctx.comm, r.max_relative_error, ccl::ReduceOp::max);
  if (ctx.rank == 0) report_size(ctx, c, layout, r);
  if (wrong > 0)
    std::fprintf(stderr, "[rank %d] %s at %zu B: %lld of its %zu output elements wrong\n", ctx.rank,
                 collective_name(c), layout.total_count * ctx.element_size,
                 static_cast<long long>(wrong), layout.output_count);
}

std::vector<int64_t> nominal_sizes(const Options& o) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) sizes.push_back(bytes);
  return sizes;
}

// Every collective at every size on comm (o.nproc ranks). Returns this
// rank's wrong elements and those of all ranks.
std::pair<int64_t, int64_t> benchmark(Communicator& comm, const Options& o) {
  const int rank = comm.rank();
  const size_t element_size = ccl::dtype_size(o.dtype);
  const std::vector<int64_t> sizes = nominal_sizes(o);
  size_t input_capacity = 0, output_capacity = 0;
  for (Collective c : o.collectives) {
    for (int64_t bytes : sizes) {
      Layout layout = layout_for(c, bytes, o.nproc, element_size);
      input_capacity = std::max(input_capacity, layout.input_count * element_size);
      output_capacity = std::max(output_capacity, layout.output_count * element_size);
    }
  }
  RankContext ctx{o,  comm, rank, o.nproc, element_size, std::vector<uint8_t>(input_capacity),
                  std::vector<uint8_t>(output_capacity), "", "", 0, 0};

  if (rank == 0) {
    const ccl::HostTopology& topology = comm.topology();
    std::printf("# hosts=%d ranks_on_host0=%d sockets_per_peer=%d\n", topology.num_hosts(), topology.local_size,
                comm.config().sockets_per_peer);
  }
  // Every rank says which transport carries each of its peer pairs.
  for (int peer = rank + 1; peer < o.nproc; ++peer) {
    std::printf("# pair %d-%d transport=%s same_host=%d\n", rank, peer, comm.transport_to(peer).c_str(),
                comm.topology().same_host(rank, peer) ? 1 : 0);
  }
  std::fflush(stdout);
  std::tie(ctx.transport_pairs, ctx.transport_kinds) = gather_transports(comm);
  for (Collective c : o.collectives) {
    if (c == Collective::sendrecv && o.nproc < 2) {
      if (rank == 0) std::printf("#\n# sendrecv skipped: needs --nproc 2 or more\n");
      continue;
    }
    if (rank == 0) {
      std::string title = std::string(collective_name(c));
      if (c == Collective::allreduce) title += " (algorithm " + std::string(ccl::algorithm_name(o.algorithm)) + ")";
      if (c == Collective::sendrecv) title += " (ring: r -> r+1)";
      if (o.wire != ccl::WireDType::none)
        title += " wire " + std::string(ccl::wire_dtype_name(o.wire)) + " (effective busbw, from the " +
                 ccl::dtype_name(o.dtype) + " bytes)";
      title += "  busbw factor " + std::to_string(busbw_factor(collective_name(c), o.nproc));
      print_table_header(title);
    }
    size_t previous_total = 0;
    for (int64_t bytes : sizes) {
      Layout layout = layout_for(c, bytes, o.nproc, element_size);
      if (layout.total_count == previous_total) continue;  // same row after rounding to elements
      previous_total = layout.total_count;
      run_size(ctx, c, layout);
    }
  }
  ccl::barrier(comm).wait();
  return {ctx.wrong, ctx.total_wrong};
}

// --bind: the CPU of each forked rank, or none. Printed.
std::vector<int> rank_cpus(const Options& o) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> usable;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed)) usable.push_back(c);
  }
  const bool bind = !usable.empty() && (o.bind == "core" || (o.bind == "auto" && o.nproc <= static_cast<int>(usable.size())));
  std::vector<int> cpus;
  if (bind) {
    for (int r = 0; r < o.nproc; ++r) cpus.push_back(usable[r % usable.size()]);
  }
  std::printf("# binding: %s", bind ? "core" : "none");
  for (int r = 0; r < static_cast<int>(cpus.size()); ++r) std::printf("%s rank %d on cpu %d", r ? "," : ":", r, cpus[r]);
  std::printf(" (--bind %s, %zu usable cpus)\n", o.bind.c_str(), usable.size());
  std::fflush(stdout);
  return cpus;
}

void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) std::perror("giant bench ccl: sched_setaffinity");
}

// The body of one forked rank process.
int run_rank(int rank, const Options& o, const ccl::CommConfig& config, const std::string& secret,
             int port_pipe_fd) {
  int port = 0;
  ssize_t got = read(port_pipe_fd, &port, sizeof port);
  close(port_pipe_fd);
  if (got != static_cast<ssize_t>(sizeof port)) throw std::runtime_error("no store port from the launcher");
  auto store = std::make_shared<ccl::TcpStore>("127.0.0.1", port, secret, config.connect_timeout);
  auto comm = Communicator::create(store, rank, o.nproc, config, "bench");
  return benchmark(*comm, o).first == 0 ? kExitOk : kExitWrongResults;
}

std::string random_secret() {
  std::random_device device;
  std::string secret;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) secret += hex[device() % 16];
  return secret;
}

// default < the bench's own default timeout < GIANT_CCL_* < --set < --sockets/--timeout.
Tunables make_tunables(const Options& o, const ccl::Environment& env, bool print) {
  Tunables tunables;
  ccl::CommConfig::define_tunables(tunables);
  // A benchmark should fail fast rather than wait out the library's 5 minutes.
  tunables.set("ccl.timeout", "60s", TunableSource::config);
  tunables.apply_environment(env.vars());
  for (const auto& [name, value] : o.tunable_overrides) tunables.set(name, value, TunableSource::command_line);
  if (o.sockets) tunables.set("ccl.tcp.sockets_per_peer", std::to_string(*o.sockets), TunableSource::command_line);
  if (o.timeout_seconds) {
    tunables.set("ccl.timeout", std::to_string(*o.timeout_seconds), TunableSource::command_line);
  }
  if (print) {
    std::printf("# tunables:\n");
    for (const std::string& line : split_list(tunables.describe(), '\n')) std::printf("#   %s\n", line.c_str());
  }
  return tunables;
}

// The run's settings, printed once by the parent or rank 0.
void print_preamble(const Options& o, const std::string& launcher) {
  std::string collectives;
  for (Collective c : o.collectives) collectives += (collectives.empty() ? "" : ",") + std::string(collective_name(c));
  std::printf("# giant bench ccl nproc=%d collectives=%s bytes=%lld..%lld step_factor=%d dtype=%s op=%s "
              "root=%d algorithm=%s warmup=%d repeat=%d",
              o.nproc, collectives.c_str(), static_cast<long long>(o.min_bytes),
              static_cast<long long>(o.max_bytes), o.step_factor, ccl::dtype_name(o.dtype),
              ccl::reduce_op_name(o.op), o.root, ccl::algorithm_name(o.algorithm), o.warmup, o.repeat);
  if (o.wire != ccl::WireDType::none) std::printf(" wire=%s", ccl::wire_dtype_name(o.wire));
  if (!launcher.empty()) std::printf(" launched=%s", launcher.c_str());
  std::printf("\n");
  if (o.iters > 0) std::printf("# iters=%d per size\n", o.iters);
  else std::printf("# iters per size: budget %gs, %d..%d\n", o.budget_seconds, o.min_iters, o.max_iters);
}

// The ccl settings and the run's limit (no figure without its peer or limit).
void print_config_and_limit(const ccl::CommConfig& config) {
  std::printf("# ccl: timeout=%lldms connect_timeout=%lldms sockets_per_peer=%d segment_bytes=%zu "
              "(ring segments at most %zu on tcp_gbps=%g) halving_doubling_max_bytes=%zu\n",
              static_cast<long long>(config.timeout.count()),
              static_cast<long long>(config.connect_timeout.count()), config.sockets_per_peer,
              config.segment_bytes, ccl::detail::link_segment_bytes(config), config.tcp_gbps,
              config.halving_doubling_max_bytes);
  // The limit of the same run, measured before any rank starts.
  double memcpy_gbps = measure_memcpy_gbps();
  std::printf("# limit: single-thread memcpy %.2f GB/s\n", memcpy_gbps);
  std::printf("bench=limit name=memcpy_1thread bytes=%d gbps=%.3f\n", 64 << 20, memcpy_gbps);
  std::fflush(stdout);
}

// --launched: this process is one rank; a launcher started the others and
// serves the store (or rank 0 does, per ccl's bootstrap). Rank 0 prints.
int run_launched(Options o) {
  const ccl::Environment env = ccl::Environment::from_process();
  const ccl::BootstrapInfo info = ccl::resolve_bootstrap(env);
  check_world_size(o, info.world_size);
  o.nproc = info.world_size;
  const bool leader = info.rank == 0;
  if (leader) print_preamble(o, info.source + (info.host_id.empty() ? "" : " host_id=" + info.host_id));
  const Tunables tunables = make_tunables(o, env, leader);
  if (leader) print_config_and_limit(ccl::CommConfig::from_tunables(tunables));
  try {
    ccl::Bootstrap boot = ccl::bootstrap_from_environment(env, tunables);
    const auto [wrong, total_wrong] = benchmark(*boot.world, o);
    if (leader)
      std::printf("# %s\n", total_wrong == 0 ? "all ranks finished, all results correct"
                                             : "FAILED: wrong results (see above)");
    std::fflush(stdout);
    // This process's own status, for the launcher: results wrong here or on another rank fail the run.
    return wrong == 0 && total_wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "giant bench ccl: rank %d failed: %s\n", info.rank, e.what());
    return 1;
  }
}

}  // namespace

int run_ccl_bench(const Options& o) {
  if (o.launched) return run_launched(o);
  print_preamble(o, "");
  const ccl::CommConfig config =
      ccl::CommConfig::from_tunables(make_tunables(o, ccl::Environment::from_process(), /*print=*/true));
  print_config_and_limit(config);

  // The ranks are forked before the store server starts its threads (a fork
  // copies only the calling thread, and a lock held by another one would stay
  // locked forever in the child); each rank then reads the port from its pipe.
  const std::string secret = random_secret();
  std::vector<std::array<int, 2>> pipes(o.nproc);
  for (auto& p : pipes)
    if (pipe(p.data()) != 0) throw std::runtime_error("pipe failed");
  const std::vector<int> cpus = rank_cpus(o);
  auto pids = fork_ranks(o.nproc, [&](int rank) {
    if (!cpus.empty()) pin_to_cpu(cpus[rank]);
    for (int r = 0; r < o.nproc; ++r) {
      close(pipes[r][1]);
      if (r != rank) close(pipes[r][0]);
    }
    return run_rank(rank, o, config, secret, pipes[rank][0]);
  });
  for (auto& p : pipes) close(p[0]);
  std::unique_ptr<ccl::TcpStoreServer> server;
  try {
    server = std::make_unique<ccl::TcpStoreServer>("127.0.0.1", 0, secret);
  } catch (...) {
    for (pid_t pid : pids) kill(pid, SIGKILL);
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
    throw;
  }
  const int port = server->port();
  for (auto& p : pipes) {
    if (write(p[1], &port, sizeof port) != static_cast<ssize_t>(sizeof port))
      std::fprintf(stderr, "giant bench ccl: could not pass the store port to a rank\n");
    close(p[1]);
  }
  // A rank that fails makes the others fail within twice the timeout (ccl
  // contract); they get a few seconds to report their own view, then die.
  const bool ok = wait_ranks(pids, /*grace_seconds=*/5, o.run_timeout_seconds);
  std::printf("# %s\n", ok ? "all ranks finished, all results correct" : "FAILED (see above)");
  return ok ? 0 : 1;
}

}  // namespace giant::bench
