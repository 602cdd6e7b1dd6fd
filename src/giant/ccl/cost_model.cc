#include "giant/ccl/cost_model.h"

#include <algorithm>
#include <cmath>

namespace giant::ccl::detail {
namespace {

struct Link {
  double alpha;  // seconds per message
  double beta;   // bytes per second
};

// Ring allreduce over n ranks: 2(n-1) steps, each moving 1/n of the buffer.
double ring_seconds(int n, double bytes, const Link& link) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * link.alpha + 2.0 * (n - 1) / n * bytes / link.beta;
}

// The shm allreduce: one step (copy in, every rank folds all inputs) for
// small buffers; else per chunk three synchronisations, and per rank a copy
// in, a reduction of 1/n of the chunk from n slots and a copy out.
double shm_allreduce_seconds(int n, double bytes, double chunk_bytes, const Link& shm) {
  if (bytes <= 32768) return shm.alpha + (1.0 + n) * bytes / shm.beta;
  double chunks = std::ceil(bytes / chunk_bytes);
  return 3.0 * chunks * shm.alpha + 3.0 * bytes / shm.beta;
}

}  // namespace

size_t pipeline_segment_bytes(const CommConfig& config, size_t block_bytes, int hops) {
  constexpr size_t kMin = 64 << 10, kMax = 4 << 20, kAlign = 4 << 10;
  const double alpha = config.tcp_alpha_us * 1e-6, beta = config.tcp_gbps * 1e9;
  const double block = static_cast<double>(block_bytes);
  const double k = std::sqrt(std::max(1, hops - 1) * block / (alpha * beta));
  size_t segment = k > 1 ? static_cast<size_t>(block / k) : block_bytes;
  segment = std::clamp(segment, kMin, kMax);
  return (segment + kAlign - 1) / kAlign * kAlign;
}

std::vector<std::vector<int>> ranks_by_host(const Communicator& comm) {
  const HostTopology& t = comm.topology();
  std::vector<std::vector<int>> hosts(t.num_hosts());
  for (int r = 0; r < comm.size(); ++r) hosts[t.host_of_rank[r]].push_back(r);
  return hosts;
}

std::vector<int> cross_host_ring(const Communicator& comm) {
  const HostTopology& t = comm.topology();
  if (!comm.shared_memory() && t.local_size > 1) return {};
  std::vector<int> ring;
  for (const auto& members : ranks_by_host(comm)) {
    if (static_cast<int>(members.size()) != t.local_size) return {};
    ring.push_back(members[t.local_rank]);
  }
  return ring;
}

std::vector<AlgorithmCost> allreduce_costs(const Communicator& comm, size_t nbytes) {
  const CommConfig& c = comm.config();
  const Link tcp{c.tcp_alpha_us * 1e-6, c.tcp_gbps * 1e9};
  const Link shm{c.shm_alpha_us * 1e-6, c.shm_gbps * 1e9};
  const int n = comm.size();
  const int hosts = comm.topology().num_hosts();
  const double bytes = static_cast<double>(nbytes);
  std::vector<AlgorithmCost> costs;
  costs.push_back({Algorithm::ring, ring_seconds(n, bytes, tcp)});
  if (nbytes <= c.halving_doubling_max_bytes) {
    // Rabenseifner: the ring's bandwidth term in 2 log2(n) steps.
    double steps = 2.0 * std::ceil(std::log2(static_cast<double>(n)));
    costs.push_back({Algorithm::halving_doubling, steps * tcp.alpha + 2.0 * (n - 1) / n * bytes / tcp.beta});
  }
  if (comm.shared_memory() && hosts == 1) {
    costs.push_back({Algorithm::shm, shm_allreduce_seconds(n, bytes, static_cast<double>(c.shm_chunk_bytes), shm)});
  }
  std::vector<int> ring = cross_host_ring(comm);
  if (hosts > 1 && !ring.empty() && comm.shared_memory()) {
    // Reduce-scatter and allgather in shm, then the rings of all local ranks
    // share the host's link, together carrying what one ring of hosts would.
    int local = comm.topology().local_size;
    double inside = 2.0 * shm_allreduce_seconds(local, bytes / 2, static_cast<double>(c.shm_chunk_bytes), shm);
    double across = 2.0 * (hosts - 1) * tcp.alpha + 2.0 * (hosts - 1) / hosts * bytes / tcp.beta;
    costs.push_back({Algorithm::hierarchical, inside + across});
  }
  std::stable_sort(costs.begin(), costs.end(),
                   [](const AlgorithmCost& a, const AlgorithmCost& b) { return a.seconds < b.seconds; });
  return costs;
}

}  // namespace giant::ccl::detail
