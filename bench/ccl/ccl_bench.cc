// `giant bench ccl`: bandwidth and correctness of ccl's collectives, in the
// style of nccl-tests. The parent serves a TcpStore on 127.0.0.1 and forks one
// process per rank; every rank runs each collective at each size (warmup,
// then timed iterations, each waited for before the next), and rank 0 prints
// one table per collective plus one key=value line per row. The time of a row
// is the slowest rank's mean. Every result is checked against the exact
// expected values; any wrong element or failed rank makes the exit non-zero.
//
// See kUsage for the flags. Sizes follow nccl-tests: S is the whole buffer
// (allreduce, broadcast, reduce, send/recv: each rank's buffer; reduce_scatter
// and scatter: the input of size() blocks; allgather and gather: the output
// of size() blocks; alltoall: each rank's input), rounded down to whole
// elements per rank (at least one).

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ccl_bench.h"

#include "bench_common.h"
#include "element_values.h"
#include "giant/base/tunables.h"
#include "giant/ccl/bootstrap.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/config.h"
#include "giant/ccl/store.h"
#include "giant/ccl/types.h"

namespace giant::bench {
namespace {

using ccl::Algorithm;
using ccl::Communicator;

constexpr const char* kUsage =
    "usage: giant bench ccl [--nproc 4] [--collectives all | allreduce,reduce_scatter,...]\n"
    "         [--min-bytes 8] [--max-bytes 256MiB] [--step-factor 2] [--bytes SIZE]\n"
    "         [--dtype f32] [--op sum] [--root 0] [--algorithm automatic|ring|halving_doubling]\n"
    "         [--iters N] [--warmup 2] [--budget 0.2s] [--max-iters 100] [--repeat 1]\n"
    "         [--sockets N] [--timeout 60s] [--run-timeout 1h] [--set ccl.NAME=VALUE ...]\n"
    "collectives: allreduce reduce_scatter allgather alltoall broadcast reduce gather scatter\n"
    "             sendrecv (a ring: rank r sends to r+1 and receives from r-1)\n"
    "--iters 0 (default) picks per size max(2, min(max-iters, budget / warmup time)).\n"
    "--warmup is at least 1 (the last warmup run sizes the iteration count).\n"
    "--repeat R times each size R times (rep=0..R-1) and adds a median row (rep=-1).\n"
    "--set overrides a ccl.* tunable (e.g. --set ccl.segment_bytes=4MiB) and wins over\n"
    "GIANT_CCL_* in the environment; --sockets and --timeout (default 60s) win over both.\n";

enum class Collective { allreduce, reduce_scatter, allgather, alltoall, broadcast, reduce, gather, scatter, sendrecv };
constexpr Collective kAllCollectives[] = {
    Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
    Collective::alltoall,  Collective::broadcast,      Collective::reduce,
    Collective::gather,    Collective::scatter,        Collective::sendrecv};

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::allreduce: return "allreduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::allgather: return "allgather";
    case Collective::alltoall: return "alltoall";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::gather: return "gather";
    case Collective::scatter: return "scatter";
    case Collective::sendrecv: return "sendrecv";
  }
  return "?";
}

bool is_reduction(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce_scatter || c == Collective::reduce;
}
bool is_rooted(Collective c) {
  return c == Collective::broadcast || c == Collective::reduce || c == Collective::gather ||
         c == Collective::scatter;
}

struct Options {
  int nproc = 4;
  std::vector<Collective> collectives{std::begin(kAllCollectives), std::end(kAllCollectives)};
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{256} << 20;
  int step_factor = 2;
  ccl::DType dtype = ccl::DType::f32;
  ccl::ReduceOp op = ccl::ReduceOp::sum;
  int root = 0;
  Algorithm algorithm = Algorithm::automatic;
  int iters = 0;  // 0: time-budgeted per size
  int warmup = 2;
  double budget_seconds = 0.2;
  int max_iters = 100;
  int min_iters = 2;
  int repeat = 1;
  std::optional<int> sockets;
  std::optional<double> timeout_seconds;  // unset: 60 s unless GIANT_CCL_TIMEOUT says otherwise
  double run_timeout_seconds = 3600;
  std::vector<std::pair<std::string, std::string>> tunable_overrides;
};

Options parse_options(int argc, char** argv) {
  Options o;
  FlagReader flags(argc, argv);
  while (flags.next()) {
    const std::string& flag = flags.flag();
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--nproc") {
      o.nproc = parse_int(flags.value(), flag, 1);
    } else if (flag == "--collectives") {
      std::string list = flags.value();
      o.collectives.clear();
      for (const std::string& name : split_list(list)) {
        if (name == "all") {
          o.collectives.assign(std::begin(kAllCollectives), std::end(kAllCollectives));
          continue;
        }
        auto found = std::find_if(std::begin(kAllCollectives), std::end(kAllCollectives),
                                  [&](Collective c) { return name == collective_name(c); });
        if (found == std::end(kAllCollectives))
          throw std::invalid_argument("unknown collective '" + name + "'\n" + kUsage);
        o.collectives.push_back(*found);
      }
      if (o.collectives.empty()) throw std::invalid_argument("--collectives is empty");
    } else if (flag == "--bytes") {
      o.min_bytes = o.max_bytes = parse_size(flags.value());
    } else if (flag == "--min-bytes") {
      o.min_bytes = parse_size(flags.value());
    } else if (flag == "--max-bytes") {
      o.max_bytes = parse_size(flags.value());
    } else if (flag == "--step-factor") {
      o.step_factor = parse_int(flags.value(), flag, 2);
    } else if (flag == "--dtype") {
      o.dtype = ccl::parse_dtype(flags.value());
    } else if (flag == "--op") {
      o.op = ccl::parse_reduce_op(flags.value());
    } else if (flag == "--root") {
      o.root = parse_int(flags.value(), flag, 0);
    } else if (flag == "--algorithm") {
      o.algorithm = ccl::parse_algorithm(flags.value());
    } else if (flag == "--iters") {
      o.iters = parse_int(flags.value(), flag, 0);
    } else if (flag == "--warmup") {
      o.warmup = std::max(1, parse_int(flags.value(), flag, 0));
    } else if (flag == "--budget") {
      o.budget_seconds = parse_seconds(flags.value());
    } else if (flag == "--max-iters") {
      o.max_iters = parse_int(flags.value(), flag, 1);
    } else if (flag == "--repeat") {
      o.repeat = parse_int(flags.value(), flag, 1);
    } else if (flag == "--sockets") {
      o.sockets = parse_int(flags.value(), flag, 1);
    } else if (flag == "--timeout") {
      o.timeout_seconds = parse_seconds(flags.value());
    } else if (flag == "--run-timeout") {
      o.run_timeout_seconds = parse_seconds(flags.value());
    } else if (flag == "--set") {
      std::string assignment = flags.value();
      size_t eq = assignment.find('=');
      if (eq == std::string::npos || eq == 0)
        throw std::invalid_argument("--set expects NAME=VALUE, got '" + assignment + "'");
      o.tunable_overrides.emplace_back(assignment.substr(0, eq), assignment.substr(eq + 1));
    } else {
      throw std::invalid_argument("unknown flag " + flag + "\n" + kUsage);
    }
  }
  // Bad input gets a clear error before any process starts (DESIGN.md).
  if (o.min_bytes < 1 || o.max_bytes < o.min_bytes)
    throw std::invalid_argument("need 1 <= --min-bytes <= --max-bytes");
  if (o.root >= o.nproc) throw std::invalid_argument("--root must be below --nproc");
  if (o.op == ccl::ReduceOp::avg && !ccl::is_floating(o.dtype))
    throw std::invalid_argument("--op avg needs a floating dtype, got " +
                                std::string(ccl::dtype_name(o.dtype)));
  o.min_iters = std::min(o.min_iters, o.max_iters);
  return o;
}

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
int64_t count_wrong(const RankContext& ctx, Collective c, const Layout& layout,
                    const InputPattern& pattern) {
  const ElementChecker checker(ctx.options.dtype, ctx.options.op);
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

// The algorithm `automatic` runs, by the rule documented in CommConfig
// (halving-doubling up to halving_doubling_max_bytes, ring above).
Algorithm resolved_algorithm(const ccl::CommConfig& config, Algorithm requested, int64_t bytes) {
  if (requested != Algorithm::automatic) return requested;
  return static_cast<size_t>(bytes) <= config.halving_doubling_max_bytes ? Algorithm::halving_doubling
                                                                        : Algorithm::ring;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One row (or R rows) of the table: fill, warm up, time, check, report.
// Returns the wrong elements of this rank.
int64_t run_size(RankContext& ctx, Collective c, const Layout& layout) {
  const Options& o = ctx.options;
  const InputPattern pattern(o.op, ctx.nproc);
  for (size_t i = 0; i < layout.input_count; ++i)
    store_element(o.dtype, ctx.input.data(), i, pattern.value(ctx.rank, i));
  // A sentinel (NaN, or all ones for integers) so that unwritten output is wrong.
  std::fill_n(ctx.output.begin(), layout.output_count * ctx.element_size, uint8_t{0xff});

  double last_warmup = 0;
  for (int i = 0; i < o.warmup; ++i) {
    auto start = std::chrono::steady_clock::now();
    run_once(ctx, c, layout);
    last_warmup = seconds_since(start);
  }
  int iters = o.iters;
  if (iters == 0) {
    // Every rank must run the same count: size it from the slowest rank.
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
  // Every iteration writes the same result, so the last one is checked.
  const int64_t wrong = count_wrong(ctx, c, layout, pattern);
  const auto total_wrong = static_cast<int64_t>(
      allreduce_scalar(ctx.comm, static_cast<double>(wrong), ccl::ReduceOp::sum));

  if (ctx.rank == 0) {
    Measurement m;
    m.bench = "ccl";
    m.collective = collective_name(c);
    m.nproc = ctx.nproc;
    m.bytes = static_cast<int64_t>(layout.total_count * ctx.element_size);
    m.count = static_cast<int64_t>(layout.total_count);
    m.dtype = ccl::dtype_name(o.dtype);
    m.op = is_reduction(c) ? ccl::reduce_op_name(o.op) : "-";
    m.root = is_rooted(c) ? o.root : -1;
    m.iters = iters;
    m.wrong = total_wrong;
    // Every pair uses the same transport so far; name it per row so parsers need not guess.
    m.transport = ctx.comm.transport_to((ctx.rank + 1) % ctx.nproc);
    m.extra = {{"sockets", std::to_string(ctx.comm.config().sockets_per_peer)}};
    if (c == Collective::allreduce) {
      m.algorithm = ccl::algorithm_name(resolved_algorithm(ctx.comm.config(), o.algorithm, m.bytes));
      m.extra.emplace_back("algorithm_requested", ccl::algorithm_name(o.algorithm));
    }
    for (int rep = 0; rep < o.repeat; ++rep) {
      m.rep = rep;
      m.time_us = rep_times_us[rep];
      print_measurement(m);
    }
    if (o.repeat > 1) {
      m.rep = -1;
      m.time_us = median(rep_times_us);
      m.extra.emplace_back("stat", "median");
      print_measurement(m);
    }
  }
  if (wrong > 0)
    std::fprintf(stderr, "[rank %d] %s at %zu B: %lld of its %zu output elements wrong\n", ctx.rank,
                 collective_name(c), layout.total_count * ctx.element_size,
                 static_cast<long long>(wrong), layout.output_count);
  return wrong;
}

std::vector<int64_t> nominal_sizes(const Options& o) {
  std::vector<int64_t> sizes;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) sizes.push_back(bytes);
  return sizes;
}

// The body of one rank process.
int run_rank(int rank, const Options& o, const ccl::CommConfig& config, const std::string& secret,
             int port_pipe_fd) {
  int port = 0;
  ssize_t got = read(port_pipe_fd, &port, sizeof port);
  close(port_pipe_fd);
  if (got != static_cast<ssize_t>(sizeof port)) throw std::runtime_error("no store port from the launcher");
  auto store = std::make_shared<ccl::TcpStore>("127.0.0.1", port, secret, config.connect_timeout);
  auto comm = Communicator::create(store, rank, o.nproc, config, "bench");

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
  RankContext ctx{o, *comm, rank, o.nproc, element_size,
                  std::vector<uint8_t>(input_capacity), std::vector<uint8_t>(output_capacity)};

  if (rank == 0) {
    const ccl::HostTopology& topology = comm->topology();
    std::printf("# hosts=%d ranks_on_host0=%d sockets_per_peer=%d\n", topology.num_hosts(), topology.local_size,
                comm->config().sockets_per_peer);
  }
  // Every rank says which transport carries each of its peer pairs.
  for (int peer = rank + 1; peer < o.nproc; ++peer) {
    std::printf("# pair %d-%d transport=%s same_host=%d\n", rank, peer, comm->transport_to(peer).c_str(),
                comm->topology().same_host(rank, peer) ? 1 : 0);
  }
  std::fflush(stdout);
  if (rank == 0) {
  }
  int64_t wrong = 0;
  for (Collective c : o.collectives) {
    if (c == Collective::sendrecv && o.nproc < 2) {
      if (rank == 0) std::printf("#\n# sendrecv skipped: needs --nproc 2 or more\n");
      continue;
    }
    if (rank == 0) {
      std::string title = std::string(collective_name(c));
      if (c == Collective::allreduce) title += " (algorithm " + std::string(ccl::algorithm_name(o.algorithm)) + ")";
      if (c == Collective::sendrecv) title += " (ring: r -> r+1)";
      title += "  busbw factor " + std::to_string(busbw_factor(collective_name(c), o.nproc));
      print_table_header(title);
    }
    size_t previous_total = 0;
    for (int64_t bytes : sizes) {
      Layout layout = layout_for(c, bytes, o.nproc, element_size);
      if (layout.total_count == previous_total) continue;  // same row after rounding to elements
      previous_total = layout.total_count;
      wrong += run_size(ctx, c, layout);
    }
  }
  ccl::barrier(*comm).wait();
  return wrong == 0 ? kExitOk : kExitWrongResults;
}

std::string random_secret() {
  std::random_device device;
  std::string secret;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) secret += hex[device() % 16];
  return secret;
}

// default < the bench's own default timeout < GIANT_CCL_* < --set < --sockets/--timeout.
ccl::CommConfig make_config(const Options& o) {
  Tunables tunables;
  ccl::CommConfig::define_tunables(tunables);
  // A benchmark should fail fast rather than wait out the library's 5 minutes.
  tunables.set("ccl.timeout", "60s", TunableSource::config);
  tunables.apply_environment(ccl::Environment::from_process().vars());
  for (const auto& [name, value] : o.tunable_overrides) tunables.set(name, value, TunableSource::command_line);
  if (o.sockets) tunables.set("ccl.tcp.sockets_per_peer", std::to_string(*o.sockets), TunableSource::command_line);
  if (o.timeout_seconds) {
    tunables.set("ccl.timeout", std::to_string(*o.timeout_seconds), TunableSource::command_line);
  }
  std::printf("# tunables:\n");
  for (const std::string& line : split_list(tunables.describe(), '\n')) std::printf("#   %s\n", line.c_str());
  return ccl::CommConfig::from_tunables(tunables);
}

int run(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  std::string collectives;
  for (Collective c : o.collectives) collectives += (collectives.empty() ? "" : ",") + std::string(collective_name(c));
  std::printf("# giant bench ccl nproc=%d collectives=%s bytes=%lld..%lld step_factor=%d dtype=%s op=%s "
              "root=%d algorithm=%s warmup=%d repeat=%d\n",
              o.nproc, collectives.c_str(), static_cast<long long>(o.min_bytes),
              static_cast<long long>(o.max_bytes), o.step_factor, ccl::dtype_name(o.dtype),
              ccl::reduce_op_name(o.op), o.root, ccl::algorithm_name(o.algorithm), o.warmup, o.repeat);
  if (o.iters > 0) std::printf("# iters=%d per size\n", o.iters);
  else std::printf("# iters per size: budget %gs, %d..%d\n", o.budget_seconds, o.min_iters, o.max_iters);
  const ccl::CommConfig config = make_config(o);
  std::printf("# ccl: timeout=%lldms connect_timeout=%lldms sockets_per_peer=%d segment_bytes=%zu "
              "halving_doubling_max_bytes=%zu\n",
              static_cast<long long>(config.timeout.count()),
              static_cast<long long>(config.connect_timeout.count()), config.sockets_per_peer,
              config.segment_bytes, config.halving_doubling_max_bytes);
  // The limit of the same run (DESIGN.md), measured before any rank starts.
  double memcpy_gbps = measure_memcpy_gbps();
  std::printf("# limit: single-thread memcpy %.2f GB/s\n", memcpy_gbps);
  std::printf("bench=limit name=memcpy_1thread bytes=%d gbps=%.3f\n", 64 << 20, memcpy_gbps);

  // The ranks are forked before the store server starts its threads (a fork
  // copies only the calling thread, and a lock held by another one would stay
  // locked forever in the child); each rank then reads the port from its pipe.
  const std::string secret = random_secret();
  std::vector<std::array<int, 2>> pipes(o.nproc);
  for (auto& p : pipes)
    if (pipe(p.data()) != 0) throw std::runtime_error("pipe failed");
  auto pids = fork_ranks(o.nproc, [&](int rank) {
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

}  // namespace

int run_ccl_bench(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "giant bench ccl: %s\n", e.what());
    return 2;
  }
}

}  // namespace giant::bench
