#include "giant/planner/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <ostream>
#include <thread>

#include "giant/base/error.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/ccl/store.h"
#include "giant/planner/comm_model.h"
#include "giant/planner/eval_runs.h"

namespace giant::planner {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Median over `repeats` of fn()'s duration, after one warm-up call.
template <class Fn>
double median_seconds(int repeats, Fn&& fn) {
  fn();
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto start = Clock::now();
    fn();
    times.push_back(seconds_since(start));
  }
  return median(times);
}

// `ranks` threads, each with a communicator over one MemoryStore, time
// allreduces; rank 0's medians are returned (each run ends in a barrier-
// like allreduce, so every rank sees about the same time).
AllreduceTimes measure_allreduce(const CalibrationOptions& o, bool distinct_hosts) {
  auto store = std::make_shared<ccl::MemoryStore>();
  AllreduceTimes result;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(o.ranks));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < o.ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        ccl::CommConfig config;
        config.timeout = std::chrono::seconds(60);
        config.connect_timeout = std::chrono::seconds(60);
        config.listen_address = "127.0.0.1";
        config.host_id = distinct_hosts ? "calibrate-host-" + std::to_string(rank) : "calibrate-host";
        auto comm = ccl::Communicator::create(store, rank, o.ranks, config, distinct_hosts ? "inter" : "intra");
        auto time_allreduce = [&](int64_t bytes) {
          std::vector<float> buffer(static_cast<size_t>(std::max<int64_t>(1, bytes / 4)), 1.0f);
          ccl::AllreduceOptions options;
          options.input = buffer.data();
          options.output = buffer.data();
          options.count = buffer.size();
          return median_seconds(o.repeats, [&] { ccl::allreduce(*comm, options).wait(); });
        };
        const double small = time_allreduce(o.latency_bytes);
        const double large = time_allreduce(o.bandwidth_bytes);
        if (rank == 0) result = {o.ranks, o.latency_bytes, small, o.bandwidth_bytes, large};
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return result;
}

// Streaming copy of `bytes` (past the caches).
struct CopyBuffers {
  explicit CopyBuffers(size_t bytes) : a(bytes, 1), b(bytes, 2) {}
  void copy() { std::memcpy(b.data(), a.data(), a.size()); }
  std::vector<char> a, b;
};

// A rate measured alone, and the slowest device's while every device of
// the host works: a synchronous step (dp, tp) goes at the slowest one's pace.
struct RatePair {
  double alone = 0;
  double busy = 0;
};

// Each rate is the median of `calls` of `measure_once`.
RatePair alone_and_busy(int devices, int calls, const std::function<double()>& measure_once) {
  auto measure = [&] {
    std::vector<double> rates;
    for (int i = 0; i < std::max(1, calls); ++i) rates.push_back(measure_once());
    return median(rates);
  };
  RatePair r;
  r.alone = measure();
  if (devices <= 1) {
    r.busy = r.alone;
  } else {
    const std::vector<double> rates = measure_while_busy(devices, measure);
    r.busy = *std::min_element(rates.begin(), rates.end());
  }
  return r;
}

}  // namespace

double measure_memory_bandwidth(int64_t bytes, int repeats) {
  CopyBuffers buffers(static_cast<size_t>(bytes));
  const double t = median_seconds(repeats, [&] { buffers.copy(); });
  return 2.0 * buffers.a.size() / t;  // read and write
}

LinkSpec link_from_allreduce(const AllreduceTimes& t, Transport transport) {
  const double n = t.ranks;
  LinkSpec link;
  link.transport = transport;
  // busbw of the large allreduce; the latency that makes the model's
  // allreduce (comm_model.h, ccl's choice) take the small one's time: the
  // model is linear in it, its steps the coefficient.
  link.bandwidth_bytes_per_s = 2 * (n - 1) / n * static_cast<double>(t.large_bytes) / t.large_s;
  GroupLink group;
  group.size = t.ranks;
  group.bandwidth_bytes_per_s = link.bandwidth_bytes_per_s;
  const double bandwidth_part = allreduce_seconds(static_cast<double>(t.small_bytes), group);
  group.latency_s = 1;
  const double steps = allreduce_seconds(static_cast<double>(t.small_bytes), group) - bandwidth_part;
  link.latency_s = std::max(1e-7, (t.small_s - bandwidth_part) / steps);
  link.efficiency = 1.0;  // the bandwidth is already what ccl achieves
  return link;
}

GemmFit fit_gemm_curve(const std::vector<GemmSample>& samples) {
  GIANT_CHECK(!samples.empty(), "no GEMM samples to fit");
  // Overheads tried: none, then 0.1 us to 1 ms in steps of 10^0.1.
  std::vector<double> overheads = {0};
  for (int i = 0; i <= 40; ++i) overheads.push_back(1e-7 * std::pow(10.0, i / 10.0));
  GemmFit best;
  double best_error = 1e300;
  for (double c : overheads) {
    // The rates with the overhead taken out; an overhead longer than a
    // sample's whole time cannot explain it (nor can any longer one).
    std::vector<double> flops(samples.size()), without(samples.size());
    bool possible = true;
    for (size_t i = 0; i < samples.size(); ++i) {
      const GemmSample& s = samples[i];
      flops[i] = 2.0 * s.m * s.n * s.k;
      const double seconds = flops[i] / s.flops_per_s;
      possible = possible && seconds > c;
      without[i] = possible ? flops[i] / (seconds - c) : 0;
    }
    if (!possible) break;
    for (double d = 0; d <= 256; d += 1) {
      // For fixed c and d, log peak is the mean of log(rate without c x (1 + d/m + d/n + d/k)).
      double mean_log_peak = 0;
      for (size_t i = 0; i < samples.size(); ++i) {
        const GemmSample& s = samples[i];
        mean_log_peak += std::log(without[i] * (1 + d / s.m + d / s.n + d / s.k));
      }
      const double peak = std::exp(mean_log_peak / samples.size());
      double error = 0;
      for (size_t i = 0; i < samples.size(); ++i) {
        const GemmSample& s = samples[i];
        const double predicted = flops[i] / (flops[i] * (1 + d / s.m + d / s.n + d / s.k) / peak + c);
        const double r = std::log(predicted / s.flops_per_s);
        error += r * r;
      }
      if (error < best_error) best_error = error, best = {peak, d, c};
    }
  }
  return best;
}

double stream_triad_bytes_per_s(int64_t elements, int repeats) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(1, elements));
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  float s = 0.5f;
  const double t = median_seconds(repeats, [&] {
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    s = a[n / 2] * 1e-9f + 0.5f;  // the result is used: the loop is not removed
  });
  return 12.0 * static_cast<double>(n) / t;
}

std::vector<double> measure_while_busy(int busy, const std::function<double()>& measure) {
  if (busy <= 1) return {measure()};
  std::vector<double> results(static_cast<size_t>(busy));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(busy));
  std::atomic<int> ready{0}, finished{0};
  std::vector<std::thread> threads;
  for (int d = 0; d < busy; ++d) {
    threads.emplace_back([&, d] {
      ready.fetch_add(1);
      while (ready.load() < busy) std::this_thread::yield();
      bool counted = false;
      try {
        results[static_cast<size_t>(d)] = measure();
        finished.fetch_add(1);
        counted = true;
        while (finished.load() < busy) measure();  // stay busy until every device has its figure
      } catch (...) {
        errors[static_cast<size_t>(d)] = std::current_exception();
        if (!counted) finished.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

double measure_blocked_matmul_flops(int64_t m, int64_t n, int64_t k, int repeats) {
  std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f), c(static_cast<size_t>(m * n));
  constexpr int64_t kBlock = 64;
  auto multiply = [&] {
    std::fill(c.begin(), c.end(), 0.0f);
    for (int64_t i0 = 0; i0 < m; i0 += kBlock)
      for (int64_t p0 = 0; p0 < k; p0 += kBlock)
        for (int64_t i = i0; i < std::min(m, i0 + kBlock); ++i)
          for (int64_t p = p0; p < std::min(k, p0 + kBlock); ++p) {
            const float av = a[static_cast<size_t>(i * k + p)];
            float* crow = &c[static_cast<size_t>(i * n)];
            const float* brow = &b[static_cast<size_t>(p * n)];
            for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
          }
  };
  return 2.0 * m * n * k / median_seconds(repeats, multiply);
}

namespace {

// GEMM and elementwise rates computing in `precision`: the curve fitted to
// the GEMM shapes' busy rates, and the elementwise kernels' busy rate.
PrecisionRates measure_compute_rates(const CalibrationProbes& probes, const CalibrationOptions& o,
                                     Precision precision, int busy, std::ostream& log) {
  const char* dtype = precision_name(precision);
  std::vector<GemmSample> alone_samples, busy_samples;
  for (const auto& [m, n, k] : o.gemm_shapes) {
    auto gemm = [&, m = m, n = n, k = k] {
      return probes.gemm_flops_per_s ? probes.gemm_flops_per_s(precision, m, n, k)
                                     : measure_blocked_matmul_flops(m, n, k, o.repeats);
    };
    const RatePair rate = alone_and_busy(busy, o.probe_calls, gemm);
    alone_samples.push_back({m, n, k, rate.alone});
    busy_samples.push_back({m, n, k, rate.busy});
    log << "calibrate=gemm dtype=" << dtype << " m=" << m << " n=" << n << " k=" << k
        << " gflops=" << rate.alone / 1e9 << " gflops_busy=" << rate.busy / 1e9 << "\n";
  }
  const GemmFit alone_fit = fit_gemm_curve(alone_samples), fit = fit_gemm_curve(busy_samples);
  PrecisionRates rates;
  rates.peak_flops = fit.peak_flops;
  rates.gemm_efficiency = 1.0;  // the fitted peak is what GEMMs reach
  rates.gemm_half_dim = std::max(1.0, fit.half_dim);
  rates.gemm_overhead_s = fit.overhead_s;
  log << "calibrate=gemm_fit dtype=" << dtype << " peak_gflops=" << alone_fit.peak_flops / 1e9
      << " half_dim=" << alone_fit.half_dim << " overhead_us=" << alone_fit.overhead_s * 1e6
      << " peak_gflops_busy=" << fit.peak_flops / 1e9 << " half_dim_busy=" << fit.half_dim
      << " overhead_us_busy=" << fit.overhead_s * 1e6 << "\n";

  auto elementwise = [&] {
    return probes.elementwise_bytes_per_s
               ? probes.elementwise_bytes_per_s(precision, o.elementwise_rows, o.elementwise_cols)
               : stream_triad_bytes_per_s(o.elementwise_rows * o.elementwise_cols, o.repeats);
  };
  const RatePair ew = alone_and_busy(busy, o.probe_calls, elementwise);
  rates.elementwise_bytes_per_s = ew.busy;
  log << "calibrate=elementwise dtype=" << dtype << " rows=" << o.elementwise_rows << " cols=" << o.elementwise_cols
      << " gbytes_per_s=" << ew.alone / 1e9 << " gbytes_per_s_busy=" << ew.busy / 1e9 << "\n";
  return rates;
}

// fp32 first: the [device] rates every cluster file has.
constexpr Precision kCalibratedPrecisions[] = {Precision::fp32, Precision::bf16, Precision::fp16};

// The probes' answer; without one, fp32 only (the built-in loops are float32).
std::string why_unsupported(const CalibrationProbes& probes, Precision precision) {
  if (probes.why_unsupported) return probes.why_unsupported(precision);
  return precision == Precision::fp32 ? "" : "no precision probe given; the built-in loops measure fp32 only";
}

}  // namespace

ClusterSpec calibrate_this_machine(const CalibrationProbes& probes, const CalibrationOptions& o, std::ostream& log) {
  GIANT_CHECK(o.ranks >= 2, "--calibrate needs at least 2 ranks for the ccl figures, got ", o.ranks);
  ClusterSpec c;
  c.name = "calibrated";
  c.hosts = 1;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  c.devices_per_host = o.devices > 0 ? o.devices : static_cast<int>(std::max(1L, cores));
  c.device.type = probes.device_type;
  c.device.dtype_bytes = precision_bytes(Precision::fp32);
  const int busy = c.devices_per_host;
  log << "# rates of one device alone, and of the slowest device while all " << busy
      << " devices of the host work (*_busy, written to the cluster file)\n";
  if (!probes.gemm_flops_per_s)
    log << "# no GEMM probe given: measuring a plain blocked float32 C++ matmul instead of the training "
           "library's GEMM\n";
  if (!probes.elementwise_bytes_per_s)
    log << "# no elementwise probe given: measuring a plain C++ streaming loop instead of the training "
           "library's kernels\n";
  for (Precision precision : kCalibratedPrecisions) {
    const std::string why_not = why_unsupported(probes, precision);
    if (!why_not.empty()) {
      GIANT_CHECK(precision != Precision::fp32, "--calibrate: the device cannot compute in fp32: ", why_not);
      log << "# " << precision_name(precision) << ": no rates written (" << why_not << ")\n";
      continue;
    }
    const PrecisionRates rates = measure_compute_rates(probes, o, precision, busy, log);
    if (precision != Precision::fp32) {
      c.device.precision_rates[precision] = rates;
      continue;
    }
    c.device.peak_flops = rates.peak_flops;
    c.device.gemm_efficiency = rates.gemm_efficiency;
    c.device.gemm_half_dim = rates.gemm_half_dim;
    c.device.gemm_overhead_s = rates.gemm_overhead_s;
    c.device.elementwise_bytes_per_s = rates.elementwise_bytes_per_s;
  }

  // Each device streams its own buffers (written before they are timed).
  auto memory_bandwidth = [&] { return measure_memory_bandwidth(o.memory_bytes, o.repeats); };
  const RatePair memory = alone_and_busy(busy, o.probe_calls, memory_bandwidth);
  c.device.memory_bandwidth_bytes_per_s = memory.busy;
  const double pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  c.device.memory_bytes = pages * page / c.devices_per_host;
  c.device.reserved_bytes = 0.1 * c.device.memory_bytes;
  log << "calibrate=memory bandwidth_gbytes_per_s=" << memory.alone / 1e9
      << " bandwidth_gbytes_per_s_busy=" << memory.busy / 1e9 << " bytes_per_device=" << c.device.memory_bytes
      << "\n";

  const AllreduceTimes intra = measure_allreduce(o, false);
  c.intra_host = link_from_allreduce(intra, Transport::tcp);
  log << "calibrate=ccl_allreduce link=intra_host ranks=" << o.ranks << " busbw_gbytes_per_s="
      << c.intra_host.bandwidth_bytes_per_s / 1e9 << " latency_us=" << c.intra_host.latency_s * 1e6 << "\n";
  const AllreduceTimes inter = measure_allreduce(o, true);
  c.inter_host = link_from_allreduce(inter, Transport::tcp);
  log << "calibrate=ccl_allreduce link=inter_host ranks=" << o.ranks << " busbw_gbytes_per_s="
      << c.inter_host.bandwidth_bytes_per_s / 1e9 << " latency_us=" << c.inter_host.latency_s * 1e6
      << " (distinct host ids over loopback; network namespaces need root and are not created)\n";
  c.validate();
  return c;
}

}  // namespace giant::planner
