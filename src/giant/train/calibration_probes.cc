#include "giant/train/calibration_probes.h"

#include <functional>
#include <vector>

#include <torch/torch.h>

#include "giant/base/timer.h"
#include "giant/models/layer_norm.h"
#include "giant/base/statistics.h"
#include "giant/train/precision_choice.h"
#include "giant/train/run_device.h"

namespace giant::train {

namespace {

// Seconds per call of fn on `device` (a GPU's work waited for), after a
// warm-up (pages, BLAS buffers, a GPU's kernel choice): the median of
// `repeats` calls, or with min_seconds > 0 the mean over calls made for at
// least that long, which spans the scheduler's time slices and so shows the
// rate a rank keeps while others share its core.
double seconds_per_call(const std::function<void()>& fn, int repeats, double min_seconds, c10::Device device) {
  auto call = [&] {
    fn();
    synchronize(device);
  };
  call();
  if (min_seconds > 0) {
    Stopwatch watch;
    int calls = 0;
    do {
      call();
      ++calls;
    } while (watch.seconds() < min_seconds);
    return watch.seconds() / calls;
  }
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    Stopwatch watch;
    call();
    times.push_back(watch.seconds());
  }
  return median(times);
}

}  // namespace

// FLOP/s of a linear layer's GEMMs as training runs them, for m rows, k
// inputs and n outputs: forward y = x W^T, then the input gradient dy W and
// the weight gradient dy^T x (W stored [n, k] as torch::nn::Linear and Giant's
// parallel linears keep it): 6 m n k FLOPs. The transposed operands run
// slower than a plain square product.
double measure_linear_gemm_flops(Precision precision, int64_t m, int64_t n, int64_t k, double min_seconds,
                                 c10::Device device) {
  torch::NoGradGuard no_grad;
  const auto type = torch::dtype(scalar_type_of(precision)).device(device);
  const torch::Tensor x = torch::rand({m, k}, type), w = torch::rand({n, k}, type), dy = torch::rand({m, n}, type);
  torch::Tensor y = torch::empty({m, n}, type), dx = torch::empty({m, k}, type), dw = torch::empty({n, k}, type);
  const double seconds = seconds_per_call(
      [&] {
        torch::mm_out(y, x, w.t());
        torch::mm_out(dx, dy, w);
        torch::mm_out(dw, dy.t(), x);
      },
      3, min_seconds, device);
  return 6.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / seconds;
}

// Bytes read + written per second by the elementwise kernels a transformer
// layer runs between its GEMMs, each on a rows x cols tensor of the dtype
// with its output freshly allocated, as in training: layer norm (in fp32,
// as the models run it) and softmax over rows, GeLU, a residual add and a transposing copy (the head split).
// Total bytes over total time: medians of 5 after a warm-up, or with
// min_seconds > 0 the mean over rounds of all kernels for that long.
double measure_elementwise_bytes_per_s(Precision precision, int64_t rows, int64_t cols, double min_seconds,
                                       c10::Device device) {
  torch::NoGradGuard no_grad;
  const auto type = torch::dtype(scalar_type_of(precision)).device(device);
  const torch::Tensor x = torch::rand({rows, cols}, type), y = torch::rand({rows, cols}, type);
  const torch::Tensor weight = torch::ones({cols}, type), bias = torch::zeros({cols}, type);
  const double n = static_cast<double>(rows) * static_cast<double>(cols) * precision_bytes(precision);
  struct Kernel {
    std::function<torch::Tensor()> run;
    double bytes;
  };
  const std::vector<Kernel> kernels = {
      {[&] { return models::layer_norm_fp32(x, cols, weight, bias); }, 2 * n},
      {[&] { return torch::softmax(x, -1); }, 2 * n},
      {[&] { return torch::gelu(x); }, 2 * n},
      {[&] { return x + y; }, 3 * n},
      {[&] { return x.t().contiguous(); }, 2 * n},
  };
  double bytes = 0, seconds = 0;
  for (const auto& kernel : kernels) bytes += kernel.bytes;
  if (min_seconds > 0) {
    // All kernels in turn over one window: a kernel timed alone for a few
    // milliseconds sees whichever share of the core the scheduler gave it then.
    seconds = seconds_per_call([&] { for (const auto& kernel : kernels) kernel.run(); }, 1, min_seconds, device);
    return bytes / seconds;
  }
  for (const auto& kernel : kernels) seconds += seconds_per_call([&] { kernel.run(); }, 5, 0, device);
  return bytes / seconds;
}

double measure_device_copy_bytes_per_s(c10::Device device, int64_t bytes, int repeats) {
  torch::NoGradGuard no_grad;
  const auto type = torch::dtype(torch::kByte).device(device);
  const torch::Tensor from = torch::ones({bytes}, type);
  torch::Tensor to = torch::empty({bytes}, type);
  return 2.0 * static_cast<double>(bytes) / seconds_per_call([&] { to.copy_(from); }, repeats, 0, device);
}

planner::CalibrationProbes libtorch_calibration_probes() {
  planner::CalibrationProbes probes;
  probes.device_type = "cpu";
  // The probes run on several threads at once (the other devices' load);
  // the thread count is per calling thread under OpenMP, so each call sets it.
  probes.gemm_flops_per_s = [](Precision precision, int64_t m, int64_t n, int64_t k) {
    torch::set_num_threads(1);
    return measure_linear_gemm_flops(precision, m, n, k);
  };
  probes.elementwise_bytes_per_s = [](Precision precision, int64_t rows, int64_t cols) {
    torch::set_num_threads(1);
    return measure_elementwise_bytes_per_s(precision, rows, cols);
  };
  probes.why_unsupported = [](Precision precision) {
    torch::set_num_threads(1);
    return unsupported_reason(precision);
  };
  return probes;
}

}  // namespace giant::train
