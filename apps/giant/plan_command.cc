// giant plan: the planner's command, with libtorch GEMM and elementwise
// probes for --calibrate: they time the kernels training runs, as it runs them.
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include "cli_support.h"
#include "commands.h"
#include "giant/base/error.h"
#include "giant/planner/plan_command.h"

namespace giant::app {

namespace {

double median_seconds(const std::function<void()>& fn, int repeats) {
  fn();  // warm-up: pages, BLAS buffers
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// FLOP/s of a linear layer's GEMMs as training runs them, for m rows, k
// inputs and n outputs: forward y = x W^T, then the input gradient dy W and
// the weight gradient dy^T x (W stored [n, k] as torch::nn::Linear and Giant's
// parallel linears keep it): 6 m n k FLOPs. The transposed operands run
// slower than a plain square product.
double measure_linear_gemm_flops(int64_t m, int64_t n, int64_t k) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::rand({m, k}), w = torch::rand({n, k}), dy = torch::rand({m, n});
  torch::Tensor y = torch::empty({m, n}), dx = torch::empty({m, k}), dw = torch::empty({n, k});
  const double seconds = median_seconds(
      [&] {
        torch::mm_out(y, x, w.t());
        torch::mm_out(dx, dy, w);
        torch::mm_out(dw, dy.t(), x);
      },
      3);
  return 6.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / seconds;
}

// Bytes read + written per second by the elementwise kernels a transformer
// layer runs between its GEMMs, each on a float32 rows x cols tensor with
// its output freshly allocated, as in training: layer norm and softmax over
// rows, GeLU, a residual add and a transposing copy (the head split). Total
// bytes over total time, medians of 5 after a warm-up.
double measure_elementwise_bytes_per_s(int64_t rows, int64_t cols) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::rand({rows, cols}), y = torch::rand({rows, cols});
  const torch::Tensor weight = torch::ones({cols}), bias = torch::zeros({cols});
  const double n = static_cast<double>(rows) * static_cast<double>(cols) * sizeof(float);
  struct Kernel {
    std::function<torch::Tensor()> run;
    double bytes;
  };
  const std::vector<Kernel> kernels = {
      {[&] { return torch::layer_norm(x, {cols}, weight, bias, 1e-5); }, 2 * n},
      {[&] { return torch::softmax(x, -1); }, 2 * n},
      {[&] { return torch::gelu(x); }, 2 * n},
      {[&] { return x + y; }, 3 * n},
      {[&] { return x.t().contiguous(); }, 2 * n},
  };
  double bytes = 0, seconds = 0;
  for (const auto& kernel : kernels) {
    bytes += kernel.bytes;
    seconds += median_seconds([&] { kernel.run(); }, 5);
  }
  return bytes / seconds;
}

}  // namespace

int plan_command(const std::vector<std::string>& args) {
  CLI::App cli("", "giant plan");
  planner::PlanArgs plan_args;
  GlobalFlags global;
  planner::add_plan_flags(cli, plan_args);
  add_global_flags(cli, global);
  if (const auto code = parse_command_line(cli, args)) return *code;
  apply_global_flags(global);

  planner::CalibrationProbes probes;
  probes.device_type = "cpu";
  probes.dtype_bytes = 4;  // float32, as giant train runs on CPUs
  // A device is one rank on one core, as giant launch runs them with
  // train.threads = 1. The probes run on several threads at once (the other
  // devices' load); the thread count is per calling thread under OpenMP, so
  // each call sets it.
  probes.gemm_flops_per_s = [](int64_t m, int64_t n, int64_t k) {
    torch::set_num_threads(1);
    return measure_linear_gemm_flops(m, n, k);
  };
  probes.elementwise_bytes_per_s = [](int64_t rows, int64_t cols) {
    torch::set_num_threads(1);
    return measure_elementwise_bytes_per_s(rows, cols);
  };
  try {
    return planner::run_plan_command(plan_args, std::cout, std::cerr, probes);
  } catch (const c10::Error& e) {
    return report_failure("giant plan", Error(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return report_failure("giant plan", e);
  }
}

}  // namespace giant::app
