#include "giant/train/cluster_probe.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "giant/base/error.h"
#include "giant/base/statistics.h"
#include "giant/base/timer.h"
#include "giant/base/units.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/parallel/tensor_collectives.h"
#include "giant/planner/calibrate.h"
#include "giant/planner/comm_model.h"
#include "giant/train/calibration_probes.h"
#include "giant/train/run_device.h"

namespace giant::train {
namespace {

constexpr int64_t kLatencyBytes = 64;  // small enough that the time is latency
constexpr int64_t kPilotBytes = 64 << 10;
constexpr int64_t kMaxLargeBytes = 64 << 20;
constexpr int kRepeats = 3;
constexpr int64_t kCopyBytes = 32 << 20;
constexpr int64_t kDeviceCopyBytes = 512 << 20;  // a GPU's memory streams past its caches at this size
constexpr double kMostSecondsPerLink = 2.0;
// Each rate is kept up this long: many of the scheduler's time slices, so a
// rank sharing its core with others measures its share, not a lucky slice.
constexpr double kSustainedSeconds = 0.25;
// The elementwise kernels are short: their round is kept up longer.
constexpr double kElementwiseSeconds = 0.5;

// Agrees values over comm in one allreduce: every rank gets, for each, the
// smallest or the largest (op) any rank has.
std::vector<double> agreed(ccl::Communicator& comm, const std::vector<double>& values, ccl::ReduceOp op) {
  at::Tensor t = torch::tensor(values, torch::kDouble);
  parallel::allreduce_(t, comm, op);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

double agreed_max(ccl::Communicator& comm, double value) { return agreed(comm, {value}, ccl::ReduceOp::max)[0]; }

// Median over `repeats` of one allreduce of `bytes` on `device`'s memory
// (host buffers through ccl's engine, a GPU's through its device backend),
// after a warm-up when asked; the ranks agree on the slowest median (the
// same figure everywhere).
double allreduce_seconds(ccl::Communicator& comm, int64_t bytes, int repeats, bool warm_up, c10::Device device) {
  const at::Tensor buffer =
      torch::ones({std::max<int64_t>(1, bytes / 4)}, torch::dtype(torch::kFloat).device(device));
  auto once = [&] {
    parallel::allreduce_(buffer, comm);
    synchronize(device);
  };
  if (warm_up) once();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    Stopwatch watch;
    once();
    times.push_back(watch.seconds());
  }
  return agreed_max(comm, median(times));
}

// The two allreduce sizes on comm. The large one grows from a pilot until
// one allreduce takes its share of `seconds` (the repeats and a warm-up
// fit in them), so a fast link is timed on megabytes, well past its
// latency, and a slow one on what it moves in that time, never on more.
// A TCP link's large allreduce runs as training's will: on a group whose
// cost model has the pilot's rate, so that ccl cuts it into the segments
// it would use on this link (ccl's defaults suit a fast one).
planner::AllreduceTimes time_link(ccl::Communicator& comm, double seconds, bool tcp, c10::Device device) {
  planner::AllreduceTimes t;
  t.ranks = comm.size();
  t.small_bytes = kLatencyBytes;
  t.small_s = allreduce_seconds(comm, kLatencyBytes, 5, true, device);  // also opens the connections
  const double each_s = seconds / (kRepeats + 1);
  int64_t bytes = kPilotBytes;
  double once_s = allreduce_seconds(comm, bytes, 1, false, device);
  while (once_s < each_s / 2 && bytes < kMaxLargeBytes) {
    const double growth = std::clamp(each_s / std::max(once_s, 1e-6), 2.0, 16.0);
    bytes = std::min(kMaxLargeBytes, static_cast<int64_t>(static_cast<double>(bytes) * growth) / 4 * 4);
    once_s = allreduce_seconds(comm, bytes, 1, false, device);
  }
  t.large_bytes = bytes;
  std::shared_ptr<ccl::Communicator> tuned;
  if (tcp && device.is_cpu()) {  // ccl's own segments; NCCL cuts its own
    const planner::AllreduceTimes pilot{t.ranks, t.small_bytes, t.small_s, bytes, once_s};
    const auto link = planner::link_from_allreduce(pilot, planner::Transport::tcp);
    tuned = comm.split(0, comm.rank(), planner::with_tcp_link(comm.config(), link));
  }
  t.large_s = allreduce_seconds(tuned ? *tuned : comm, bytes, kRepeats, false, device);
  return t;
}

// Every rank's rates in the run's precision (measured by all at once), as
// the slowest rank has them: the GEMM shapes', the elementwise kernels' and
// a streaming copy's.
std::vector<double> slowest_rates(ccl::Communicator* world, const ClusterProbeOptions& o,
                                  const std::vector<std::array<int64_t, 3>>& shapes) {
  const planner::CalibrationOptions calibration;
  torch::set_num_threads(o.threads);
  if (world != nullptr && world->size() > 1) ccl::barrier(*world).wait();  // all start together
  std::vector<double> rates;
  for (const auto& [m, n, k] : shapes) {
    rates.push_back(measure_linear_gemm_flops(o.precision, m, n, k, kSustainedSeconds, o.device));
  }
  rates.push_back(measure_elementwise_bytes_per_s(o.precision, calibration.elementwise_rows,
                                                  calibration.elementwise_cols, kElementwiseSeconds, o.device));
  rates.push_back(o.device.is_cpu() ? planner::measure_memory_bandwidth(kCopyBytes, kRepeats)
                                    : measure_device_copy_bytes_per_s(o.device, kDeviceCopyBytes, kRepeats));
  if (world != nullptr && world->size() > 1) rates = agreed(*world, rates, ccl::ReduceOp::min);
  return rates;
}

// Ranks per host, the same on every host (else a ConfigError).
int uniform_ranks_per_host(const ccl::HostTopology& topology) {
  std::map<int, int> ranks_of_host;
  for (int host : topology.host_of_rank) ++ranks_of_host[host];
  const int first = ranks_of_host.begin()->second;
  for (const auto& [host, ranks] : ranks_of_host) {
    if (ranks != first) {
      throw ConfigError("parallel.cluster", "host '" + topology.host_ids.at(static_cast<size_t>(host)) + "' runs " +
                                                std::to_string(ranks) + " rank(s) and host '" +
                                                topology.host_ids.front() + "' " + std::to_string(first) +
                                                ": parallel.auto measures clusters of identical hosts; give a "
                                                "cluster file (parallel.cluster)");
    }
  }
  return first;
}

// Inside a host, what a GPU's NCCL busbw shows: NVLink's rates are several
// times any PCIe generation's.
constexpr double kNvlinkAboveBytesPerS = 40e9;

// What carries an allreduce inside a host: shared memory or TCP between
// host buffers; NVLink or PCIe between GPUs, told apart by the link's busbw.
planner::Transport intra_host_transport(const ccl::Communicator& world, c10::Device device,
                                        const planner::LinkSpec& link) {
  if (device.is_cpu()) return world.shared_memory() ? planner::Transport::shm : planner::Transport::tcp;
  return link.bandwidth_bytes_per_s > kNvlinkAboveBytesPerS ? planner::Transport::nvlink : planner::Transport::pcie;
}

// The links inside a host and between hosts, the same on every rank, on
// `device`'s buffers. A link the cluster lacks (one rank per host, one
// host) is left at 0.
std::pair<planner::LinkSpec, planner::LinkSpec> measure_links(ccl::Communicator& world, double budget_s,
                                                              c10::Device device) {
  const ccl::HostTopology& topology = world.topology();
  const auto host = world.split(topology.host, topology.local_rank);
  const auto across = world.split(topology.local_rank == 0 ? 0 : -1, topology.host);
  planner::AllreduceTimes intra, inter;
  // Half the budget left for each link, and no more than a few seconds:
  // a large allreduce of a quarter second already shows the link's rate.
  const double per_link_s = std::min(kMostSecondsPerLink, budget_s / 2);
  if (topology.local_size > 1) intra = time_link(*host, per_link_s, !world.shared_memory(), device);
  if (across != nullptr && across->size() > 1) inter = time_link(*across, per_link_s, true, device);
  // Only some ranks measured each link: the others learn it from them.
  const std::vector<double> figures =
      agreed(world,
             {static_cast<double>(intra.large_bytes), intra.small_s, intra.large_s,
              static_cast<double>(inter.large_bytes), inter.small_s, inter.large_s},
             ccl::ReduceOp::max);
  std::pair<planner::LinkSpec, planner::LinkSpec> links;
  if (figures[0] > 0) {
    intra = {topology.local_size, kLatencyBytes, figures[1], static_cast<int64_t>(figures[0]), figures[2]};
    links.first = planner::link_from_allreduce(intra, planner::Transport::shm);  // the transport only labels it
    links.first.transport = intra_host_transport(world, device, links.first);
  }
  if (figures[3] > 0) {
    inter = {topology.num_hosts(), kLatencyBytes, figures[4], static_cast<int64_t>(figures[3]), figures[5]};
    links.second = planner::link_from_allreduce(inter, planner::Transport::tcp);
  }
  return links;
}

std::string summary_of(const planner::ClusterSpec& c, Precision precision, double seconds) {
  char line[512];
  std::snprintf(line, sizeof line,
                "measured the cluster in %.1f s: %d host(s) x %d rank(s); a rank computes %.1f GFLOP/s in %s on "
                "%s (fitted peak), elementwise %.2f GB/s; inside a host %.2f GB/s busbw, %.0f us; between hosts "
                "%s busbw, %.0f us",
                seconds, c.hosts, c.devices_per_host, c.device.peak_flops / 1e9, precision_name(precision),
                c.device.type.c_str(), c.device.elementwise_bytes_per_s / 1e9, c.intra_host.bandwidth_bytes_per_s / 1e9,
                c.intra_host.latency_s * 1e6, format_bit_rate(8 * c.inter_host.bandwidth_bytes_per_s).c_str(),
                c.inter_host.latency_s * 1e6);
  return line;
}

}  // namespace

MeasuredCluster measure_cluster(ccl::Communicator* world, const ClusterProbeOptions& options) {
  Stopwatch watch;
  const bool alone = world == nullptr || world->size() == 1;
  MeasuredCluster measured;
  planner::ClusterSpec& c = measured.cluster;
  c.name = "measured";
  c.hosts = alone ? 1 : world->topology().num_hosts();
  c.devices_per_host = alone ? 1 : uniform_ranks_per_host(world->topology());

  const auto shapes = planner::CalibrationOptions{}.gemm_shapes;
  std::vector<planner::GemmSample> samples;
  const std::vector<double> rates = slowest_rates(world, options, shapes);
  for (size_t i = 0; i < shapes.size(); ++i) samples.push_back({shapes[i][0], shapes[i][1], shapes[i][2], rates[i]});
  const planner::GemmFit fit = planner::fit_gemm_curve(samples);
  planner::DeviceSpec& d = c.device;
  const std::optional<CudaDeviceInfo> gpu =
      options.device.is_cuda() ? std::optional(cuda_device_info(options.device.index())) : std::nullopt;
  d.type = gpu ? gpu->name : "cpu";
  d.dtype_bytes = precision_bytes(options.precision);
  d.peak_flops = fit.peak_flops;
  d.gemm_efficiency = 1.0;  // the fitted peak is what GEMMs reach
  d.gemm_half_dim = std::max(1.0, fit.half_dim);
  d.gemm_overhead_s = fit.overhead_s;
  d.elementwise_bytes_per_s = rates[shapes.size()];
  d.memory_bandwidth_bytes_per_s = rates[shapes.size() + 1];
  d.precision_rates[options.precision] = {d.peak_flops, d.gemm_efficiency, d.gemm_half_dim, d.gemm_overhead_s,
                                          d.elementwise_bytes_per_s};
  const double pages = static_cast<double>(sysconf(_SC_PHYS_PAGES)), page = static_cast<double>(sysconf(_SC_PAGESIZE));
  d.memory_bytes = gpu ? gpu->memory_bytes : pages * page / c.devices_per_host;  // a GPU is each rank's own
  d.reserved_bytes = 0.1 * d.memory_bytes;

  if (!alone) {
    const double left = options.budget_s - agreed_max(*world, watch.seconds());
    const auto [intra, inter] = measure_links(*world, std::max(1.0, 0.8 * left), options.device);
    c.intra_host = intra;
    c.inter_host = inter;
  }
  // A link the cluster lacks is never used; the planner still wants one.
  if (c.intra_host.bandwidth_bytes_per_s <= 0) c.intra_host = c.inter_host;
  if (c.inter_host.bandwidth_bytes_per_s <= 0) c.inter_host = c.intra_host;
  for (planner::LinkSpec* link : {&c.intra_host, &c.inter_host}) {
    if (link->bandwidth_bytes_per_s <= 0) *link = {planner::Transport::shm, 10e9, 1e-6, 1.0};  // one rank
  }
  c.validate();
  measured.seconds = alone ? watch.seconds() : agreed_max(*world, watch.seconds());
  measured.summary = summary_of(c, options.precision, measured.seconds);
  return measured;
}

}  // namespace giant::train
