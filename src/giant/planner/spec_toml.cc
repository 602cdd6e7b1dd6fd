#include "giant/planner/spec_toml.h"

#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "giant/base/error.h"

namespace giant::planner {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path, "cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

toml::table parse(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream what;
    what << "TOML syntax error at line " << e.source().begin.line << ": " << e.description();
    throw ConfigError(source, what.str());
  }
}

// Reads the keys of one table, checking each is known and of the right type.
class TableReader {
 public:
  TableReader(const toml::table* table, std::string prefix, std::set<std::string> ignored = {})
      : table_(table), prefix_(std::move(prefix)), ignored_(std::move(ignored)) {}

  bool has(const std::string& key) const { return table_ && table_->contains(key); }

  void integer(const std::string& key, int64_t& out) {
    known_.insert(key);
    if (!has(key)) return;
    auto value = (*table_)[key].value<int64_t>();
    if (!(*table_)[key].is_integer() || !value) throw ConfigError(name(key), "expected an integer");
    out = *value;
  }
  void integer(const std::string& key, int& out) {
    int64_t v = out;
    integer(key, v);
    out = static_cast<int>(v);
  }
  // Integers are accepted where a number is expected.
  void number(const std::string& key, double& out, double scale = 1) {
    known_.insert(key);
    if (!has(key)) return;
    auto value = (*table_)[key].value<double>();
    if (!value) throw ConfigError(name(key), "expected a number");
    out = *value * scale;
  }
  void string(const std::string& key, std::string& out) {
    known_.insert(key);
    if (!has(key)) return;
    auto value = (*table_)[key].value<std::string>();
    if (!(*table_)[key].is_string() || !value) throw ConfigError(name(key), "expected a string");
    out = *value;
  }
  // Throws for the first key nobody asked for.
  void finish() const {
    if (!table_) return;
    for (const auto& [key, value] : *table_) {
      const std::string k(key.str());
      if (!known_.count(k) && !ignored_.count(k)) throw ConfigError(name(k), "unknown key");
    }
  }

 private:
  std::string name(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  const toml::table* table_;
  std::string prefix_;
  std::set<std::string> ignored_;
  std::set<std::string> known_;
};

std::string number_text(double v) {
  std::ostringstream out;
  out << std::setprecision(10) << v;
  return out.str();
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 5 && s.substr(s.size() - 5) == ".toml");
}

void read_link(TableReader& r, LinkSpec& link, const std::string& prefix) {
  std::string transport = transport_name(link.transport);
  r.string("transport", transport);
  try {
    link.transport = parse_transport(transport);
  } catch (const ConfigError& e) {
    throw ConfigError(prefix + ".transport", e.what());
  }
  if (r.has("bandwidth_gbytes_per_s") && r.has("bandwidth_gbit_per_s"))
    throw ConfigError(prefix + ".bandwidth_gbit_per_s", "give bandwidth_gbytes_per_s or bandwidth_gbit_per_s, not both");
  r.number("bandwidth_gbytes_per_s", link.bandwidth_bytes_per_s, kGB);
  r.number("bandwidth_gbit_per_s", link.bandwidth_bytes_per_s, kGB / 8);
  r.number("latency_us", link.latency_s, 1e-6);
  r.number("efficiency", link.efficiency);
  r.finish();
}

void write_link(std::ostream& out, const std::string& table, const LinkSpec& link, const std::string& note) {
  out << "\n[" << table << "]  # " << note << "\n";
  out << "transport = \"" << transport_name(link.transport) << "\"\n";
  out << "bandwidth_gbytes_per_s = " << number_text(link.bandwidth_bytes_per_s / kGB) << "\n";
  out << "latency_us = " << number_text(link.latency_s * 1e6) << "\n";
  if (link.efficiency > 0) out << "efficiency = " << number_text(link.efficiency) << "  # achieved busbw / line rate\n";
}

// [device]: the rates of its dtype (dtype_bytes), and a table per other
// precision ([device.bf16] ...) with the same rate keys.
void read_precision_rates(TableReader& r, double& peak_flops, double& gemm_efficiency, double& gemm_half_dim,
                          double& gemm_overhead_s, double& elementwise_bytes_per_s) {
  r.number("peak_tflops", peak_flops, 1e12);
  r.number("gemm_efficiency", gemm_efficiency);
  r.number("gemm_half_dim", gemm_half_dim);
  r.number("gemm_overhead_us", gemm_overhead_s, 1e-6);
  r.number("elementwise_gbytes_per_s", elementwise_bytes_per_s, kGB);
}

void read_device(const toml::table& table, DeviceSpec& device) {
  std::set<std::string> precision_tables;
  for (const auto& [key, value] : table) {
    const std::string name(key.str());
    if (!value.is_table()) continue;
    if (!parse_precision(name))
      throw ConfigError("device." + name, "unknown table (rates per precision: [device.fp32], [device.bf16], "
                                          "[device.fp16])");
    precision_tables.insert(name);
  }
  TableReader d(&table, "device", precision_tables);
  d.string("type", device.type);
  read_precision_rates(d, device.peak_flops, device.gemm_efficiency, device.gemm_half_dim, device.gemm_overhead_s,
                       device.elementwise_bytes_per_s);
  d.number("memory_gib", device.memory_bytes, kGiB);
  d.number("memory_gbytes_per_s", device.memory_bandwidth_bytes_per_s, kGB);
  d.number("reserved_gib", device.reserved_bytes, kGiB);
  d.number("dtype_bytes", device.dtype_bytes);
  d.finish();
  for (const std::string& name : precision_tables) {
    PrecisionRates rates;
    TableReader r(table[name].as_table(), "device." + name);
    read_precision_rates(r, rates.peak_flops, rates.gemm_efficiency, rates.gemm_half_dim, rates.gemm_overhead_s,
                         rates.elementwise_bytes_per_s);
    r.finish();
    device.precision_rates[*parse_precision(name)] = rates;
  }
}

void write_peak(std::ostream& out, double peak_flops, const char* note) {
  if (peak_flops > 0) out << "peak_tflops = " << number_text(peak_flops / 1e12) << note << "\n";
}

void write_rate_constants(std::ostream& out, const PrecisionRates& r) {
  if (r.gemm_efficiency > 0) out << "gemm_efficiency = " << number_text(r.gemm_efficiency) << "\n";
  if (r.gemm_half_dim > 0) out << "gemm_half_dim = " << number_text(r.gemm_half_dim) << "\n";
  if (r.gemm_overhead_s > 0)
    out << "gemm_overhead_us = " << number_text(r.gemm_overhead_s * 1e6) << "  # fixed time of each GEMM call\n";
  if (r.elementwise_bytes_per_s > 0)
    out << "elementwise_gbytes_per_s = " << number_text(r.elementwise_bytes_per_s / kGB)
        << "  # norms, softmax, GeLU, adds: bytes read + written per second\n";
}

}  // namespace

ModelSpec parse_model_toml(const std::string& text, const std::string& source) {
  const toml::table root = parse(text, source);
  if (!root["model"].is_table()) throw ConfigError(source, "has no [model] table");
  ModelSpec m;
  m.name = source;
  // Trainer-only keys of [model] are accepted and do not change the cost.
  TableReader r(root["model"].as_table(), "model", {"activation", "dropout", "init_std", "vocab_pad"});
  r.string("name", m.name);
  r.integer("layers", m.layers);
  r.integer("hidden", m.hidden);
  r.integer("heads", m.heads);
  r.integer("ffn", m.ffn);
  r.integer("seq_len", m.seq_len);
  r.integer("vocab", m.vocab);
  r.integer("global_batch", m.global_batch);
  r.finish();
  if (root["train"]["global_batch"]) {
    if (!root["train"]["global_batch"].is_integer()) throw ConfigError("train.global_batch", "expected an integer");
    m.global_batch = *root["train"]["global_batch"].value<int64_t>();
  }
  m.validate();
  return m;
}

// Errors name the file as well as the key.
template <class Fn>
auto naming_file(const std::string& path, Fn&& fn) {
  try {
    return fn();
  } catch (const ConfigError& e) {
    if (e.key() == path) throw;
    throw ConfigError(e.key(), std::string(e.what()).substr(e.key().empty() ? 0 : e.key().size() + 4) + " (in " + path + ")");
  }
}

ModelSpec load_model_toml(const std::string& path) {
  return naming_file(path, [&] { return parse_model_toml(read_file(path), path); });
}

std::string model_to_toml(const ModelSpec& m) {
  std::ostringstream out;
  out << "[model]\n";
  out << "name = \"" << m.name << "\"\n";
  out << "layers = " << m.layers << "\nhidden = " << m.hidden << "\nheads = " << m.heads << "\n";
  out << "ffn = " << m.ffn_size() << "\nseq_len = " << m.seq_len << "\nvocab = " << m.vocab << "\n";
  out << "\n[train]\nglobal_batch = " << m.global_batch << "\n";
  return out.str();
}

ClusterSpec parse_cluster_toml(const std::string& text, const std::string& source) {
  const toml::table root = parse(text, source);
  ClusterSpec c;
  c.name = source;
  TableReader top(&root, "", {"device", "intra_host", "inter_host"});
  top.string("name", c.name);
  top.integer("hosts", c.hosts);
  top.integer("devices_per_host", c.devices_per_host);
  top.finish();
  if (!root["device"].is_table()) throw ConfigError(source, "has no [device] table");
  read_device(*root["device"].as_table(), c.device);
  for (const char* table : {"intra_host", "inter_host"}) {
    if (!root[table]) continue;
    if (!root[table].is_table()) throw ConfigError(table, "expected a table");
    TableReader r(root[table].as_table(), table);
    read_link(r, std::string(table) == "intra_host" ? c.intra_host : c.inter_host, table);
  }
  c.validate();
  return c;
}

ClusterSpec load_cluster_toml(const std::string& path) {
  return naming_file(path, [&] { return parse_cluster_toml(read_file(path), path); });
}

std::string cluster_to_toml(const ClusterSpec& c) {
  std::ostringstream out;
  out << "name = \"" << c.name << "\"\nhosts = " << c.hosts << "\ndevices_per_host = " << c.devices_per_host << "\n";
  const DeviceSpec& d = c.device;
  out << "\n[device]\ntype = \"" << d.type << "\"\n";
  write_peak(out, d.peak_flops, d.element_bytes() == 2 ? "  # 16-bit dense" : "  # dense, fp32");
  out << "memory_gib = " << number_text(d.memory_bytes / kGiB) << "\n";
  out << "memory_gbytes_per_s = " << number_text(d.memory_bandwidth_bytes_per_s / kGB) << "\n";
  if (d.reserved_bytes > 0) out << "reserved_gib = " << number_text(d.reserved_bytes / kGiB) << "\n";
  write_rate_constants(
      out, {d.peak_flops, d.gemm_efficiency, d.gemm_half_dim, d.gemm_overhead_s, d.elementwise_bytes_per_s});
  if (d.dtype_bytes > 0)
    out << "dtype_bytes = " << number_text(d.dtype_bytes) << "  # the [device] rates are "
        << precision_name(d.default_precision()) << " (2 = bf16/fp16)\n";
  for (const auto& [precision, r] : d.precision_rates) {
    out << "\n[device." << precision_name(precision) << "]  # computing in " << precision_name(precision)
        << "; keys left out are the [device] ones\n";
    write_peak(out, r.peak_flops, "  # dense");
    write_rate_constants(out, r);
  }
  write_link(out, "intra_host", c.intra_host, "per device and direction");
  write_link(out, "inter_host", c.inter_host, "per host and direction");
  return out.str();
}

ModelSpec model_from_argument(const std::string& s) {
  return looks_like_path(s) ? load_model_toml(s) : model_preset(s);
}

ClusterSpec cluster_from_argument(const std::string& s) {
  return looks_like_path(s) ? load_cluster_toml(s) : cluster_preset(s);
}

}  // namespace giant::planner
