// gloo-allreduce-bench: the peer that giant-ccl-bench's allreduce is compared
// with. It runs Gloo's AllreduceRingChunked<float> over Gloo's TCP transport
// on loopback, with one process per rank, and prints the same table rows and
// key=value lines as giant-ccl-bench (bench=gloo), so one script can parse both.
//
// Usage: gloo-allreduce-bench [--nproc 2] [--bytes 64MiB | --min-bytes B --max-bytes B
//        [--step-factor 2]] [--iters 5] [--warmup 2] [--repeat 1] [--timeout 60s]

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "bench_common.h"

namespace giant::bench {
namespace {

constexpr const char* kUsage =
    "usage: gloo-allreduce-bench [--nproc N] [--bytes SIZE | --min-bytes SIZE --max-bytes SIZE]\n"
    "                            [--step-factor F] [--iters N] [--warmup N] [--repeat R]\n"
    "                            [--timeout 60s] [--run-timeout 30m]\n"
    "Gloo AllreduceRingChunked<float>, sum, over Gloo's tcp transport on 127.0.0.1.\n";

struct Options {
  int nproc = 2;
  int64_t min_bytes = int64_t{64} << 20;
  int64_t max_bytes = int64_t{64} << 20;
  int step_factor = 2;
  int iters = 5;
  int warmup = 2;
  int repeat = 1;
  double timeout_seconds = 60;
  double run_timeout_seconds = 1800;
  std::string rendezvous_dir;  // filled in by the launcher
};

Options parse_options(int argc, char** argv) {
  Options options;
  FlagReader flags(argc, argv);
  while (flags.next()) {
    const std::string& flag = flags.flag();
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--nproc") {
      options.nproc = parse_int(flags.value(), flag, 1);
    } else if (flag == "--bytes") {
      options.min_bytes = options.max_bytes = parse_size(flags.value());
    } else if (flag == "--min-bytes") {
      options.min_bytes = parse_size(flags.value());
    } else if (flag == "--max-bytes") {
      options.max_bytes = parse_size(flags.value());
    } else if (flag == "--step-factor") {
      options.step_factor = parse_int(flags.value(), flag, 2);
    } else if (flag == "--iters") {
      options.iters = parse_int(flags.value(), flag, 1);
    } else if (flag == "--warmup") {
      options.warmup = parse_int(flags.value(), flag, 0);
    } else if (flag == "--repeat") {
      options.repeat = parse_int(flags.value(), flag, 1);
    } else if (flag == "--timeout") {
      options.timeout_seconds = parse_seconds(flags.value());
    } else if (flag == "--run-timeout") {
      options.run_timeout_seconds = parse_seconds(flags.value());
    } else {
      throw std::invalid_argument("unknown flag " + flag + "\n" + kUsage);
    }
  }
  if (options.min_bytes < 4 || options.max_bytes < options.min_bytes)
    throw std::invalid_argument("need 4 <= --min-bytes <= --max-bytes");
  return options;
}

// Small integers, so the sum is exact in float in any order (tolerance 0);
// the rank term makes a block from the wrong rank visible.
float input_value(int rank, size_t index) {
  return static_cast<float>((index * 7 + static_cast<size_t>(rank) * 5) % 8);
}

// Max over ranks of one double (the slowest rank defines a collective's time).
double allreduce_double(const std::shared_ptr<gloo::Context>& context, double value,
                        const gloo::ReductionFunction<double>* fn) {
  gloo::AllreduceRing<double> algorithm(context, {&value}, 1, fn);
  algorithm.run();
  return value;
}

// Checks, warms up and times one size; returns the wrong elements over all ranks.
int64_t run_size(const std::shared_ptr<gloo::Context>& context, const Options& options,
                 int64_t bytes) {
  const int rank = context->rank;
  const int nproc = context->size;
  const size_t count = static_cast<size_t>(bytes) / sizeof(float);
  std::vector<float> data(count);
  // Gloo's allreduce is in place, so repeated runs compound the values; the
  // check therefore runs once on fresh inputs before the timed runs (which go
  // on with whatever the buffer holds: float adds cost the same for any value).
  for (size_t i = 0; i < count; ++i) data[i] = input_value(rank, i);
  gloo::AllreduceRingChunked<float> allreduce(context, {data.data()}, static_cast<int>(count));
  allreduce.run();
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int r = 0; r < nproc; ++r) expected += input_value(r, i);
    wrong += data[i] != expected;
  }
  const int64_t total_wrong = static_cast<int64_t>(
      allreduce_double(context, static_cast<double>(wrong), gloo::ReductionFunction<double>::sum));
  for (int i = 0; i < options.warmup; ++i) allreduce.run();

  gloo::BarrierAllToAll barrier(context);
  for (int rep = 0; rep < options.repeat; ++rep) {
    barrier.run();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.iters; ++i) allreduce.run();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double slowest = allreduce_double(context, seconds / options.iters,
                                      gloo::ReductionFunction<double>::max);
    if (rank == 0) {
      Measurement m;
      m.bench = "gloo";
      m.collective = "allreduce";
      m.nproc = nproc;
      m.bytes = static_cast<int64_t>(count * sizeof(float));
      m.count = static_cast<int64_t>(count);
      m.dtype = "f32";
      m.op = "sum";
      m.algorithm = "ring_chunked";
      m.iters = options.iters;
      m.rep = rep;
      m.time_us = slowest * 1e6;
      m.wrong = total_wrong;
      m.transport = "tcp";
      print_measurement(m);
    }
  }
  if (wrong > 0)
    std::fprintf(stderr, "[rank %d] %lld wrong elements at %lld bytes\n", rank,
                 static_cast<long long>(wrong), static_cast<long long>(bytes));
  return total_wrong;
}

int run_rank(int rank, const Options& options) {
  gloo::rendezvous::FileStore store(options.rendezvous_dir);
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, options.nproc);
  context->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1e3)));
  context->connectFullMesh(store, device);
  if (rank == 0) print_table_header("allreduce (gloo AllreduceRingChunked<float>, tcp 127.0.0.1)");
  int64_t wrong = 0;
  for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.step_factor)
    wrong += run_size(context, options, bytes);
  return wrong == 0 ? kExitOk : kExitWrongResults;
}

int main_impl(int argc, char** argv) {
  Options options = parse_options(argc, argv);
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "gloo-allreduce-bench.XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed for " + dir_template);
  options.rendezvous_dir = dir_template;
  std::printf("# gloo-allreduce-bench nproc=%d bytes=%lld..%lld step_factor=%d iters=%d warmup=%d "
              "repeat=%d timeout=%gs rendezvous=FileStore(%s)\n",
              options.nproc, static_cast<long long>(options.min_bytes),
              static_cast<long long>(options.max_bytes), options.step_factor, options.iters,
              options.warmup, options.repeat, options.timeout_seconds, options.rendezvous_dir.c_str());
  auto pids = fork_ranks(options.nproc, [&](int rank) { return run_rank(rank, options); });
  bool ok = wait_ranks(pids, /*grace_seconds=*/5, options.run_timeout_seconds);
  std::error_code ignored;
  std::filesystem::remove_all(options.rendezvous_dir, ignored);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace giant::bench

int main(int argc, char** argv) {
  try {
    return giant::bench::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo-allreduce-bench: %s\n", e.what());
    return 2;
  }
}
