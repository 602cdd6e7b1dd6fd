#include "giant/train/matmul_rate.h"

#include <algorithm>
#include <vector>

#include <torch/torch.h>

#include "giant/base/timer.h"
#include "giant/ccl/collectives.h"
#include "giant/ccl/communicator.h"
#include "giant/parallel/tensor_collectives.h"
#include "giant/train/precision_choice.h"
#include "giant/train/run_device.h"

namespace giant::train {

double measure_gemm_flops(int64_t m, int64_t n, int64_t k, Precision precision, int min_repetitions,
                          double min_seconds, double give_up_below, c10::Device device) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().dtype(scalar_type_of(precision)).device(device);
  const torch::Tensor a = torch::rand({m, k}).to(options), b = torch::rand({k, n}).to(options);
  torch::Tensor c = torch::empty({m, n}, options);
  // A GPU's product runs after its launch returns: time it to its end.
  const auto finish = [&] { synchronize(device); };
  torch::mm_out(c, a, b);  // warm-up: pages, BLAS buffers, threads (on a GPU: its kernel choice)
  finish();
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  std::vector<double> seconds;
  Stopwatch total;
  while (static_cast<int>(seconds.size()) < std::max(min_repetitions, 1) || total.seconds() < min_seconds) {
    Stopwatch watch;
    torch::mm_out(c, a, b);
    finish();
    seconds.push_back(watch.seconds());
    if (seconds.size() == 1 && flops / seconds[0] < give_up_below) return flops / seconds[0];
  }
  std::sort(seconds.begin(), seconds.end());
  return flops / seconds[seconds.size() / 2];
}

double MatrixRates::of(Precision precision) const {
  switch (precision) {
    case Precision::fp32: return fp32;
    case Precision::bf16: return bf16;
    case Precision::fp16: return fp16;
  }
  return 0;
}

void MatrixRates::set(Precision precision, double flops) {
  switch (precision) {
    case Precision::fp32: fp32 = flops; break;
    case Precision::bf16: bf16 = flops; break;
    case Precision::fp16: fp16 = flops; break;
  }
}

MatrixRates probe_reference_products(const std::vector<Precision>& precisions, c10::Device device) {
  MatrixRates rates;
  for (size_t i = 0; i < precisions.size(); ++i) {
    const double give_up_below = i == 0 ? 0 : rates.of(precisions[0]);
    rates.set(precisions[i], measure_gemm_flops(kReferenceGemmDim, kReferenceGemmDim, kReferenceGemmDim,
                                                precisions[i], 5, 0.1, give_up_below, device));
  }
  return rates;
}

RateProbe reference_products_on(c10::Device device) {
  return [device](const std::vector<Precision>& precisions) { return probe_reference_products(precisions, device); };
}

namespace {

void wait_for_everyone(ccl::Communicator& world) { ccl::barrier(world).wait(); }

}  // namespace

MatrixRates measure_matrix_rates(const std::vector<Precision>& precisions, int threads, ccl::Communicator* world,
                                 const RateProbe& probe) {
  torch::set_num_threads(threads);
  if (world == nullptr || world->size() == 1) return probe(precisions);
  // Turn t: the t-th rank of every host measures while the others wait.
  at::Tensor turns = torch::full({1}, world->topology().local_size, torch::kInt);
  parallel::allreduce_(turns, *world, ccl::ReduceOp::max);
  MatrixRates mine;
  for (int turn = 0; turn < turns.item<int>(); ++turn) {
    if (world->topology().local_rank == turn) mine = probe(precisions);
    wait_for_everyone(*world);
  }
  at::Tensor rates = torch::tensor({mine.fp32, mine.bf16, mine.fp16}, torch::kDouble);
  parallel::allreduce_(rates, *world, ccl::ReduceOp::min);  // the slowest rank sets the pace
  return {rates[0].item<double>(), rates[1].item<double>(), rates[2].item<double>()};
}

}  // namespace giant::train
