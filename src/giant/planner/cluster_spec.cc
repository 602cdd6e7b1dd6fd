#include "giant/planner/cluster_spec.h"

#include <algorithm>
#include <sstream>

#include "giant/base/error.h"
#include "giant/planner/efficiency_constants.h"

namespace giant::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;

struct TransportName {
  Transport transport;
  const char* name;
};
constexpr TransportName kTransports[] = {{Transport::nvlink, "nvlink"},
                                         {Transport::pcie, "pcie"},
                                         {Transport::shm, "shm"},
                                         {Transport::tcp, "tcp"},
                                         {Transport::rdma, "rdma"}};

}  // namespace

const char* transport_name(Transport transport) {
  for (const auto& t : kTransports)
    if (t.transport == transport) return t.name;
  return "?";
}

Transport parse_transport(const std::string& name) {
  for (const auto& t : kTransports)
    if (name == t.name) return t.transport;
  throw ConfigError("transport", "expected nvlink, pcie, shm, tcp or rdma, got '" + name + "'");
}

double default_link_efficiency(Transport transport) {
  return transport == Transport::tcp ? kTcpGoodputRatio * kCollectiveGoodputRatio : kCollectiveGoodputRatio;
}

double LinkSpec::effective_bandwidth() const {
  return bandwidth_bytes_per_s * (efficiency > 0 ? efficiency : default_link_efficiency(transport));
}

double DeviceSpec::usable_memory() const {
  // Context, cuBLAS workspaces and allocator fragmentation: the default
  // keeps max(2 GiB, 10%) back, what Megatron users report losing.
  const double reserved = reserved_bytes > 0 ? reserved_bytes : std::max(2 * kGiB, 0.1 * memory_bytes);
  return memory_bytes - reserved;
}

Precision DeviceSpec::default_precision() const {
  return element_bytes() == precision_bytes(Precision::fp32) ? Precision::fp32 : Precision::bf16;
}

bool DeviceSpec::has_rates_for(Precision precision) const {
  return precision_rates.count(precision) > 0 || precision_bytes(precision) == element_bytes();
}

DeviceSpec DeviceSpec::in_precision(Precision precision) const {
  DeviceSpec d = *this;
  d.precision_rates.clear();
  d.dtype_bytes = precision_bytes(precision);
  const auto table = precision_rates.find(precision);
  if (table == precision_rates.end()) return d;
  const PrecisionRates& r = table->second;
  auto take = [](double& field, double value) {
    if (value > 0) field = value;
  };
  take(d.peak_flops, r.peak_flops);
  take(d.gemm_efficiency, r.gemm_efficiency);
  take(d.gemm_half_dim, r.gemm_half_dim);
  take(d.gemm_overhead_s, r.gemm_overhead_s);
  take(d.elementwise_bytes_per_s, r.elementwise_bytes_per_s);
  return d;
}

void ClusterSpec::validate() const {
  auto positive = [](double v, const std::string& key) {
    if (!(v > 0)) throw ConfigError(key, "must be positive, got " + std::to_string(v));
  };
  positive(hosts, "hosts");
  positive(devices_per_host, "devices_per_host");
  positive(device.peak_flops, "device.peak_tflops");
  positive(device.memory_bytes, "device.memory_gib");
  positive(device.memory_bandwidth_bytes_per_s, "device.memory_gbytes_per_s");
  if (devices_per_host > 1) positive(intra_host.bandwidth_bytes_per_s, "intra_host.bandwidth_gbytes_per_s");
  if (hosts > 1) positive(inter_host.bandwidth_bytes_per_s, "inter_host.bandwidth_gbytes_per_s");
  if (device.usable_memory() <= 0)
    throw ConfigError("device.reserved_gib", "leaves no usable memory on the device");
  auto not_negative = [](double v, const std::string& key) {
    if (v < 0) throw ConfigError(key, "must not be negative, got " + std::to_string(v));
  };
  auto efficiency = [](double v, const std::string& key) {
    if (v < 0 || v > 1) throw ConfigError(key, "must be in (0, 1], got " + std::to_string(v));
  };
  not_negative(device.elementwise_bytes_per_s, "device.elementwise_gbytes_per_s");
  if (device.dtype_bytes != 0 && device.dtype_bytes != 2 && device.dtype_bytes != 4)
    throw ConfigError("device.dtype_bytes",
                      "must be 2 (bf16, fp16) or 4 (fp32), got " + std::to_string(device.dtype_bytes));
  efficiency(device.gemm_efficiency, "device.gemm_efficiency");
  not_negative(device.gemm_overhead_s, "device.gemm_overhead_us");
  for (const auto& [precision, r] : device.precision_rates) {
    const std::string table = std::string("device.") + precision_name(precision) + ".";
    not_negative(r.peak_flops, table + "peak_tflops");
    efficiency(r.gemm_efficiency, table + "gemm_efficiency");
    not_negative(r.gemm_half_dim, table + "gemm_half_dim");
    not_negative(r.gemm_overhead_s, table + "gemm_overhead_us");
    not_negative(r.elementwise_bytes_per_s, table + "elementwise_gbytes_per_s");
  }
}

ClusterSpec ClusterSpec::resolved() const {
  ClusterSpec c = *this;
  const EfficiencyConstants k = default_efficiency_constants(c.device.type);
  if (c.device.gemm_efficiency <= 0) c.device.gemm_efficiency = k.gemm_efficiency;
  if (c.device.gemm_half_dim <= 0) c.device.gemm_half_dim = k.gemm_half_dim;
  for (LinkSpec* link : {&c.intra_host, &c.inter_host})
    if (link->efficiency <= 0) link->efficiency = default_link_efficiency(link->transport);
  return c;
}

namespace {

// Data-sheet fp32 rates without tensor cores (PyTorch runs fp32 matrix
// products without TF32 by default since 1.12): A100 19.5, V100 15.7 TFLOP/s.
std::map<Precision, PrecisionRates> fp32_rates(double peak_tflops) {
  PrecisionRates r;
  r.peak_flops = peak_tflops * 1e12;
  return {{Precision::fp32, r}};
}

DeviceSpec a100(double memory_gib, double memory_gbytes_per_s) {
  return DeviceSpec{"A100", 312e12, memory_gib * kGiB, memory_gbytes_per_s * kGB, 0, 0, 0, 0, 0, 0, fp32_rates(19.5)};
}

LinkSpec link(Transport transport, double gbytes_per_s, double latency_us) {
  return LinkSpec{transport, gbytes_per_s * kGB, latency_us * 1e-6, 0};
}

// One-way small-message latency by transport: NVLink ~3 us, InfiniBand
// verbs ~5 us, kernel TCP through the socket stack ~30 us.
constexpr double kNvlinkLatencyUs = 3, kRdmaLatencyUs = 5, kTcpLatencyUs = 30;

ClusterSpec make(std::string name, DeviceSpec device, LinkSpec intra, LinkSpec inter) {
  ClusterSpec c;
  c.name = std::move(name);
  c.hosts = 4;
  c.devices_per_host = 8;
  c.device = std::move(device);
  c.intra_host = intra;
  c.inter_host = inter;
  return c;
}

}  // namespace

std::vector<std::string> cluster_preset_names() {
  return {"a100-80g-ib", "v100-tcp", "v100-rdma", "a100-40g-tcp", "a100-40g-rdma"};
}

ClusterSpec cluster_preset(const std::string& name) {
  // NVSwitch A100: 12 NVLink3 x 25 GB/s = 300 GB/s per direction; V100 SXM2:
  // 6 NVLink2 x 25 GB/s = 150 GB/s. HBM: A100-80GB 2039 GB/s, A100-40GB
  // 1555 GB/s, V100 900 GB/s. Inter-host figures are per host.
  const DeviceSpec v100{"V100", 125e12, 32 * kGiB, 900 * kGB, 0, 0, 0, 0, 0, 0, fp32_rates(15.7)};
  if (name == "a100-80g-ib")
    return make(name, a100(80, 2039), link(Transport::nvlink, 300, kNvlinkLatencyUs),
                link(Transport::rdma, 8 * 200 / 8.0, kRdmaLatencyUs));
  if (name == "v100-tcp" || name == "v100-rdma") {
    const bool rdma = name == "v100-rdma";
    return make(name, v100, link(Transport::nvlink, 150, kNvlinkLatencyUs),
                link(rdma ? Transport::rdma : Transport::tcp, 100 / 8.0, rdma ? kRdmaLatencyUs : kTcpLatencyUs));
  }
  if (name == "a100-40g-tcp" || name == "a100-40g-rdma") {
    const bool rdma = name == "a100-40g-rdma";
    return make(name, a100(40, 1555), link(Transport::nvlink, 300, kNvlinkLatencyUs),
                link(rdma ? Transport::rdma : Transport::tcp, 800 / 8.0, rdma ? kRdmaLatencyUs : kTcpLatencyUs));
  }
  std::ostringstream known;
  for (const auto& n : cluster_preset_names()) known << " " << n;
  throw ConfigError("--cluster", "unknown cluster preset '" + name + "' (presets:" + known.str() +
                                     "; or pass a TOML file)");
}

}  // namespace giant::planner
