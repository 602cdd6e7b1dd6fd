// Flags of `giant bench ccl`.
#include "ccl_bench_options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "bench_common.h"

namespace giant::bench {
namespace {

constexpr const char* kUsage =
    "usage: giant bench ccl [--nproc 4] [--collectives all | allreduce,reduce_scatter,...]\n"
    "         [--min-bytes 8] [--max-bytes 256MiB] [--step-factor 2] [--bytes SIZE]\n"
    "         [--dtype f32] [--op sum] [--root 0]\n"
    "         [--algorithm automatic|ring|halving_doubling|shm|hierarchical] [--wire none|bf16|fp16]\n"
    "         [--iters N] [--warmup 2] [--budget 0.2s] [--max-iters 100] [--repeat 1]\n"
    "         [--sockets N] [--timeout 60s] [--run-timeout 1h] [--set ccl.NAME=VALUE ...]\n"
    "         [--bind auto|core|none] [--launched]\n"
    "collectives: allreduce reduce_scatter allgather alltoall broadcast reduce gather scatter\n"
    "             sendrecv (a ring: rank r sends to r+1 and receives from r-1)\n"
    "--iters 0 (default) picks per size max(2, min(max-iters, budget / warmup time)).\n"
    "--warmup is at least 1 (the last warmup run sizes the iteration count).\n"
    "--repeat R times each size R times (rep=0..R-1) and adds a median row (rep=-1).\n"
    "--set overrides a ccl.* tunable (e.g. --set ccl.segment_bytes=4MiB) and wins over\n"
    "GIANT_CCL_* in the environment; --sockets and --timeout (default 60s) win over both.\n"
    "--wire bf16|fp16 sends allreduce data compressed between hosts (allreduce, f32 or f64\n"
    "only); results are then checked against the stated bound, relative error at most\n"
    "2^-8 (bf16) or 2^-11 (fp16) times (nproc + 1) of the sum of |inputs|, and busbw is\n"
    "the effective one, from the uncompressed bytes.\n"
    "--launched takes rank, world size, store and secret from a launcher (giant launch,\n"
    "torchrun, srun, mpirun; see ccl's bootstrap) instead of forking --nproc ranks, e.g.\n"
    "  giant launch --hosts netns:A:2,netns:B:2 --store-addr 10.0.0.1 -- giant bench ccl --launched ...\n"
    "--bind core pins forked rank r to the r-th usable CPU, none leaves them to the\n"
    "scheduler; auto (default) is core when every rank has a CPU of its own, as mpirun binds\n"
    "2 ranks by default (with ranks sharing a core, a slow op is one that waits for a switch).\n"
    "Every row names the transport of each peer pair (transports=0-1:shm,0-2:tcp,...).\n";

}  // namespace

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

double wire_relative_bound(ccl::WireDType wire, int nproc) {
  switch (wire) {
    case ccl::WireDType::none: return 0;
    case ccl::WireDType::bf16: return std::ldexp(1.0, -8) * (nproc + 1);
    case ccl::WireDType::fp16: return std::ldexp(1.0, -11) * (nproc + 1);
  }
  return 0;
}

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
      o.nproc_given = true;
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
    } else if (flag == "--wire") {
      o.wire = ccl::parse_wire_dtype(flags.value());
    } else if (flag == "--launched") {
      o.launched = true;
    } else if (flag == "--bind") {
      o.bind = flags.value();
      if (o.bind != "auto" && o.bind != "core" && o.bind != "none")
        throw std::invalid_argument("--bind must be auto, core or none, got '" + o.bind + "'");
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
  if (o.launched && o.bind == "core") throw std::invalid_argument("--bind core applies to forked ranks, not --launched");
  if (o.min_bytes < 1 || o.max_bytes < o.min_bytes)
    throw std::invalid_argument("need 1 <= --min-bytes <= --max-bytes");
  if (o.op == ccl::ReduceOp::avg && !ccl::is_floating(o.dtype))
    throw std::invalid_argument("--op avg needs a floating dtype, got " +
                                std::string(ccl::dtype_name(o.dtype)));
  if (o.wire != ccl::WireDType::none) {
    for (Collective c : o.collectives)
      if (c != Collective::allreduce)
        throw std::invalid_argument(std::string("--wire applies to allreduce only, not ") + collective_name(c) +
                                    " (add --collectives allreduce)");
    if (o.dtype != ccl::DType::f32 && o.dtype != ccl::DType::f64)
      throw std::invalid_argument(std::string("--wire needs --dtype f32 or f64, got ") + ccl::dtype_name(o.dtype));
  }
  if (!o.launched) check_world_size(o, o.nproc);
  o.min_iters = std::min(o.min_iters, o.max_iters);
  return o;
}

void check_world_size(const Options& o, int world_size) {
  if (o.launched && o.nproc_given && o.nproc != world_size)
    throw std::invalid_argument("--nproc " + std::to_string(o.nproc) + " but the launcher started " +
                                std::to_string(world_size) + " ranks (leave --nproc out with --launched)");
  if (o.root >= world_size)
    throw std::invalid_argument(o.launched ? "--root must be below the launcher's world size "
                                             + std::to_string(world_size)
                                           : std::string("--root must be below --nproc"));
}

}  // namespace giant::bench
