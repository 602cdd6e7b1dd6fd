// giant plan: the planner's command, with libtorch GEMM and elementwise
// probes for --calibrate.
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <vector>

#include <torch/torch.h>

#include "commands.h"
#include "giant/planner/plan_command.h"
#include "giant/train/matmul_rate.h"

namespace giant::app {

namespace {

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
    kernel.run();  // warm-up
    std::vector<double> times;
    for (int i = 0; i < 5; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const torch::Tensor out = kernel.run();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    bytes += kernel.bytes;
    seconds += times[times.size() / 2];
  }
  return bytes / seconds;
}

}  // namespace

int plan_command(const std::vector<std::string>& args) {
  planner::CalibrationProbes probes;
  probes.device_type = "cpu";
  probes.dtype_bytes = 4;  // float32, as giant train runs on CPUs
  // A device is one rank on one core, as giant launch runs them with
  // train.threads = 1. The probes run on several threads at once (the other
  // devices' load); the thread count is per calling thread under OpenMP, so
  // each call sets it.
  probes.gemm_flops_per_s = [](int64_t m, int64_t n, int64_t k) {
    torch::set_num_threads(1);
    return train::measure_gemm_flops(m, n, k);
  };
  probes.elementwise_bytes_per_s = [](int64_t rows, int64_t cols) {
    torch::set_num_threads(1);
    return measure_elementwise_bytes_per_s(rows, cols);
  };
  return planner::run_plan_command(args, std::cout, std::cerr, probes);
}

}  // namespace giant::app
