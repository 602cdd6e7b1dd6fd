// Flags of `giant bench ccl`.
#include "ccl_bench_options.h"

#include <algorithm>
#include <cmath>

#include <CLI/CLI.hpp>

#include "bench_common.h"
#include "giant/base/edit_distance.h"
#include "giant/base/error.h"

namespace giant::bench {
namespace {

// What each flag's one-line help cannot say.
constexpr const char* kFooter =
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
    "Every row names the transport of each peer pair (transports=0-1:shm,0-2:tcp,...).\n"
    "Exit status: 0 all results correct, 1 a wrong result or a failed rank, 2 bad flags or environment.";

[[noreturn]] void bad_flag(const std::string& message) { throw ConfigError("", message); }

std::vector<Collective> parse_collectives(const std::string& list) {
  std::vector<Collective> collectives;
  for (const std::string& name : split_list(list)) {
    if (name == "all") {
      collectives.assign(std::begin(kAllCollectives), std::end(kAllCollectives));
      continue;
    }
    auto found = std::find_if(std::begin(kAllCollectives), std::end(kAllCollectives),
                              [&](Collective c) { return name == collective_name(c); });
    if (found == std::end(kAllCollectives)) {
      std::vector<std::string> known{"all"};
      for (Collective c : kAllCollectives) known.push_back(collective_name(c));
      bad_flag("--collectives: unknown collective '" + name + "'" + did_you_mean(name, known));
    }
    collectives.push_back(*found);
  }
  if (collectives.empty()) bad_flag("--collectives is empty");
  return collectives;
}

// parse(text), its error prefixed with the flag (bench_common's and ccl's
// parsers say what they expected, not where).
template <class Parse>
auto flag_value(const char* flag, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const std::exception& e) {
    bad_flag(std::string(flag) + ": " + e.what());
  }
}

// The flags converted by the parser of each one's kind.
Options convert(const OptionFlags& f) {
  Options o;
  if (!f.nproc.empty()) o.nproc = parse_int(f.nproc, "--nproc", 1), o.nproc_given = true;
  o.collectives = parse_collectives(f.collectives);
  const auto size = [](const std::string& text) { return parse_size(text); };
  const auto seconds = [](const std::string& text) { return parse_seconds(text); };
  if (!f.bytes.empty()) {
    o.min_bytes = o.max_bytes = flag_value("--bytes", f.bytes, size);
  } else {
    o.min_bytes = flag_value("--min-bytes", f.min_bytes, size);
    o.max_bytes = flag_value("--max-bytes", f.max_bytes, size);
  }
  o.step_factor = parse_int(f.step_factor, "--step-factor", 2);
  o.dtype = flag_value("--dtype", f.dtype, ccl::parse_dtype);
  o.op = flag_value("--op", f.op, ccl::parse_reduce_op);
  o.root = parse_int(f.root, "--root", 0);
  o.algorithm = flag_value("--algorithm", f.algorithm, ccl::parse_algorithm);
  o.wire = flag_value("--wire", f.wire, ccl::parse_wire_dtype);
  o.launched = f.launched;
  o.bind = f.bind;
  o.iters = parse_int(f.iters, "--iters", 0);
  o.warmup = std::max(1, parse_int(f.warmup, "--warmup", 0));
  o.budget_seconds = flag_value("--budget", f.budget, seconds);
  o.max_iters = parse_int(f.max_iters, "--max-iters", 1);
  o.repeat = parse_int(f.repeat, "--repeat", 1);
  if (!f.sockets.empty()) o.sockets = parse_int(f.sockets, "--sockets", 1);
  if (!f.timeout.empty()) o.timeout_seconds = flag_value("--timeout", f.timeout, seconds);
  o.run_timeout_seconds = flag_value("--run-timeout", f.run_timeout, seconds);
  for (const std::string& assignment : f.set) {
    const size_t eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) bad_flag("--set expects NAME=VALUE, got '" + assignment + "'");
    o.tunable_overrides.emplace_back(assignment.substr(0, eq), assignment.substr(eq + 1));
  }
  return o;
}

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

void add_options(CLI::App& app, OptionFlags& f) {
  app.description("Benchmark ccl's collectives, nccl-tests style: every size, bandwidth and correctness.");
  app.add_option("--nproc", f.nproc, "ranks to fork (default 4; with --launched: the launcher's)");
  app.add_option("--collectives", f.collectives, "all, or a comma-separated list (see below)");
  app.add_option("--bytes", f.bytes, "one size, e.g. 64MiB (instead of --min-bytes .. --max-bytes)")
      ->excludes(app.add_option("--min-bytes", f.min_bytes, "smallest size (default 8)"))
      ->excludes(app.add_option("--max-bytes", f.max_bytes, "largest size (default 256MiB)"));
  app.add_option("--step-factor", f.step_factor, "each size is this times the one before (default 2)");
  app.add_option("--dtype", f.dtype, "element type (default f32)");
  app.add_option("--op", f.op, "reduction: sum, prod, min, max or avg (default sum)");
  app.add_option("--root", f.root, "root rank of the rooted collectives (default 0)");
  app.add_option("--algorithm", f.algorithm, "automatic, ring, halving_doubling, shm or hierarchical (default automatic)");
  app.add_option("--wire", f.wire, "none, bf16 or fp16: allreduce data compressed between hosts (default none)");
  app.add_flag("--launched", f.launched, "ranks come from a launcher instead of fork (see below)");
  app.add_option("--bind", f.bind, "auto, core or none: CPU binding of forked ranks (default auto)")
      ->check(CLI::IsMember({"auto", "core", "none"}));
  app.add_option("--iters", f.iters, "timed iterations per size (default 0: from --budget)");
  app.add_option("--warmup", f.warmup, "untimed iterations per size (default 2)");
  app.add_option("--budget", f.budget, "time per size that sizes --iters 0 (default 0.2s)");
  app.add_option("--max-iters", f.max_iters, "most iterations per size with --iters 0 (default 100)");
  app.add_option("--repeat", f.repeat, "times each size is run (default 1)");
  app.add_option("--sockets", f.sockets, "TCP sockets per peer (ccl.tcp.sockets_per_peer)");
  app.add_option("--timeout", f.timeout, "ccl.timeout of each operation (default 60s)");
  app.add_option("--run-timeout", f.run_timeout, "limit of the whole run (default 1h)");
  app.add_option("--set", f.set, "ccl.NAME=VALUE, a ccl tunable (repeatable)")->take_all();
  app.footer(kFooter);
}

Options options_from(const OptionFlags& flags) {
  Options o;
  try {
    o = convert(flags);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {  // bench_common's and ccl's parsers
    bad_flag(e.what());
  }
  // Bad input gets a clear error before any process starts.
  if (o.launched && o.bind == "core") bad_flag("--bind core applies to forked ranks, not --launched");
  if (o.min_bytes < 1 || o.max_bytes < o.min_bytes) bad_flag("need 1 <= --min-bytes <= --max-bytes");
  if (o.op == ccl::ReduceOp::avg && !ccl::is_floating(o.dtype))
    bad_flag("--op avg needs a floating dtype, got " + std::string(ccl::dtype_name(o.dtype)));
  if (o.wire != ccl::WireDType::none) {
    for (Collective c : o.collectives)
      if (c != Collective::allreduce)
        bad_flag(std::string("--wire applies to allreduce only, not ") + collective_name(c) +
                 " (add --collectives allreduce)");
    if (o.dtype != ccl::DType::f32 && o.dtype != ccl::DType::f64)
      bad_flag(std::string("--wire needs --dtype f32 or f64, got ") + ccl::dtype_name(o.dtype));
  }
  if (!o.launched) check_world_size(o, o.nproc);
  o.min_iters = std::min(o.min_iters, o.max_iters);
  return o;
}

void check_world_size(const Options& o, int world_size) {
  if (o.launched && o.nproc_given && o.nproc != world_size)
    bad_flag("--nproc " + std::to_string(o.nproc) + " but the launcher started " + std::to_string(world_size) +
             " ranks (leave --nproc out with --launched)");
  if (o.root >= world_size)
    bad_flag(o.launched ? "--root must be below the launcher's world size " + std::to_string(world_size)
                        : std::string("--root must be below --nproc"));
}

}  // namespace giant::bench
