#include "giant/train/matmul_rate.h"

#include <algorithm>
#include <vector>

#include <torch/torch.h>

#include "giant/base/timer.h"
#include "giant/train/precision_choice.h"

namespace giant::train {

double measure_gemm_flops(int64_t m, int64_t n, int64_t k, Precision precision, int min_repetitions,
                          double min_seconds) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().dtype(scalar_type_of(precision));
  const torch::Tensor a = torch::rand({m, k}).to(options), b = torch::rand({k, n}).to(options);
  torch::Tensor c = torch::empty({m, n}, options);
  torch::mm_out(c, a, b);  // warm-up: pages, BLAS buffers, threads
  std::vector<double> seconds;
  Stopwatch total;
  while (static_cast<int>(seconds.size()) < std::max(min_repetitions, 1) || total.seconds() < min_seconds) {
    Stopwatch watch;
    torch::mm_out(c, a, b);
    seconds.push_back(watch.seconds());
  }
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
         seconds[seconds.size() / 2];
}

}  // namespace giant::train
