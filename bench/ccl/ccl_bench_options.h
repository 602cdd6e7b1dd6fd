// The flags of `giant bench ccl` (giant bench ccl --help describes them) and
// the collectives it knows.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "giant/ccl/collectives.h"
#include "giant/ccl/types.h"

namespace CLI {
class App;
}

namespace giant::bench {

enum class Collective { allreduce, reduce_scatter, allgather, alltoall, broadcast, reduce, gather, scatter, sendrecv };
constexpr Collective kAllCollectives[] = {
    Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
    Collective::alltoall,  Collective::broadcast,      Collective::reduce,
    Collective::gather,    Collective::scatter,        Collective::sendrecv};

const char* collective_name(Collective c);
bool is_reduction(Collective c);
bool is_rooted(Collective c);

struct Options {
  int nproc = 4;
  bool nproc_given = false;  // --launched checks it against the launcher's world size
  std::vector<Collective> collectives{std::begin(kAllCollectives), std::end(kAllCollectives)};
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{256} << 20;
  int step_factor = 2;
  ccl::DType dtype = ccl::DType::f32;
  ccl::ReduceOp op = ccl::ReduceOp::sum;
  int root = 0;
  ccl::Algorithm algorithm = ccl::Algorithm::automatic;
  ccl::WireDType wire = ccl::WireDType::none;
  bool launched = false;  // ranks come from a launcher (giant launch, ...) instead of fork
  // Forked ranks: "core" pins rank r to the r-th usable CPU (mod their
  // count), "none" leaves placement to the scheduler, "auto" is core when
  // every rank gets a CPU of its own (what mpirun does by default at 2 ranks).
  std::string bind = "auto";
  int iters = 0;          // 0: time-budgeted per size
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

// The flags as given, before options_from checks them.
struct OptionFlags {
  std::string nproc;  // empty: not given
  std::string collectives = "all";
  std::string bytes, min_bytes = "8", max_bytes = "256MiB";
  std::string step_factor = "2";
  std::string dtype = "f32", op = "sum", root = "0";
  std::string algorithm = "automatic", wire = "none";
  bool launched = false;
  std::string bind = "auto";
  std::string iters = "0", warmup = "2", budget = "0.2s", max_iters = "100", repeat = "1";
  std::string sockets, timeout, run_timeout = "1h";
  std::vector<std::string> set;  // ccl.NAME=VALUE
};

// Adds every flag of `giant bench ccl` to app (one parser, its help
// generated), bound to flags.
void add_options(CLI::App& app, OptionFlags& flags);

// The options the flags say; throws ConfigError naming what is wrong,
// before any work starts.
Options options_from(const OptionFlags& flags);

// Checks that need the world size (known only after bootstrap with
// --launched); throws ConfigError.
void check_world_size(const Options& o, int world_size);

// The largest relative error the wire dtype allows an allreduce over nproc
// ranks, as a fraction of the sum of |inputs| (0 for none): one rounding per
// hop, bf16 keeps 8 significant bits, fp16 11.
double wire_relative_bound(ccl::WireDType wire, int nproc);

}  // namespace giant::bench
