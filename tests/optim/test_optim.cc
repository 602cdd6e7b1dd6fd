// AdamW (fused path against the tensor-op path and a hand-worked step),
// weight decay only on matrices, the LR schedule and global-norm clipping.
#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "giant/optim/adamw.h"
#include "giant/optim/clipping.h"
#include "giant/optim/lr_schedule.h"
#include "support/rounding.h"
#include "support/tensor_error.h"

namespace giant::optim {
namespace {

using giant::test::gamma;
using giant::test::relative_error;
constexpr double kFp32 = giant::test::unit_roundoff(Precision::fp32);

torch::Tensor with_grad(torch::Tensor value, torch::Tensor grad) {
  value = value.clone().set_requires_grad(true);
  value.mutable_grad() = grad.clone();
  return value;
}

TEST(AdamW, OneStepByHand) {
  // p = 1, g = 0.5, lr 0.1, decay 0.1, betas 0.9 0.99, eps 1e-8, step 1:
  // m = 0.05, v = 0.0025, m_hat = 0.5, v_hat = 0.25, update = 0.5 / 0.5 = 1,
  // p = 1 * (1 - 0.01) - 0.1 * 1 = 0.89. In fp32: about ten roundings on
  // terms of magnitude 0.99 + 0.1.
  auto p = with_grad(torch::ones({2, 2}), torch::full({2, 2}, 0.5));
  AdamW adam({p}, {0.9, 0.99, 1e-8, 0.1});
  adam.step(0.1);
  EXPECT_NEAR(p[0][0].item<float>(), 0.89, gamma(10, kFp32) * (0.99 + 0.1));
  EXPECT_EQ(adam.steps_taken(), 1);
}

TEST(AdamW, FusedPathMatchesTensorOps) {
  torch::manual_seed(0);
  auto value = torch::randn({37, 11});
  auto fused = with_grad(value, torch::zeros({37, 11}));
  auto generic = with_grad(value.to(torch::kDouble), torch::zeros({37, 11}, torch::kDouble));
  AdamW a({fused}, {}), b({generic}, {});
  for (int step = 0; step < 5; ++step) {
    auto g = torch::randn({37, 11});
    fused.mutable_grad() = g.clone();
    generic.mutable_grad() = g.to(torch::kDouble);
    a.step(1e-2);
    b.step(1e-2);
  }
  // Each fp32 step: about ten roundings per element on terms of magnitude
  // |p| + lr (AdamW moves an element by at most lr), so in norm
  // gamma_10 (||p|| + lr sqrt(n)); the 5 steps' errors add up, the double
  // path's are negligible.
  const double lr_norm = 1e-2 * std::sqrt(static_cast<double>(generic.numel()));
  EXPECT_LT(relative_error(fused, generic), 5 * gamma(10, kFp32) * (1 + lr_norm / generic.norm().item<double>()));
}

TEST(AdamW, DecaysMatricesButNotNormsOrBiases) {
  auto matrix = with_grad(torch::ones({3, 3}), torch::zeros({3, 3}));
  auto bias = with_grad(torch::ones({3}), torch::zeros({3}));
  AdamW adam({matrix, bias}, {0.9, 0.95, 1e-8, 0.5});
  adam.step(0.1);
  EXPECT_NEAR(matrix[0][0].item<float>(), 0.95, gamma(2, kFp32) * (1 + 0.05));  // 1 - lr * decay: 2 roundings
  EXPECT_EQ(bias[0].item<float>(), 1.0f);
  // A parameter without a gradient is left alone.
  auto untouched = torch::ones({2, 2}).set_requires_grad(true);
  AdamW other({untouched}, {});
  other.step(0.1);
  EXPECT_EQ(untouched[0][0].item<float>(), 1.0f);
  adam.zero_grad();
  EXPECT_FALSE(matrix.grad().defined());
}

TEST(LrSchedule, WarmupThenCosineToTheFloor) {
  const LrSchedule s{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  // In double: a handful of roundings (say 10) on terms of magnitude 1.
  const double rounding = gamma(10, giant::test::kDoubleUnitRoundoff);
  EXPECT_NEAR(s.at(60), 0.55, rounding);  // halfway: (lr + min_lr) / 2
  EXPECT_NEAR(s.at(109), 0.1 + 0.45 * (1 + std::cos(M_PI * 99 / 100)), rounding);  // the last step of the cosine
  EXPECT_DOUBLE_EQ(s.at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.at(500), 0.1);
  const LrSchedule constant{2.0, 2.0, 0, 5};
  EXPECT_DOUBLE_EQ(constant.at(3), 2.0);
  for (int64_t step = 11; step < 110; ++step) EXPECT_LE(s.at(step), s.at(step - 1));
}

TEST(Clipping, GlobalNormOverAllGradients) {
  auto a = with_grad(torch::zeros({2}), torch::tensor({3.0f, 0.0f}));
  auto b = with_grad(torch::zeros({1, 1}), torch::tensor({{4.0f}}));
  auto none = torch::zeros({3}).set_requires_grad(true);
  const std::vector<torch::Tensor> params{a, b, none};
  EXPECT_DOUBLE_EQ(global_grad_norm(params), 5.0);
  clip_grads_to_norm(params, 5.0, 10.0);  // under the limit: unchanged
  EXPECT_FLOAT_EQ(a.grad()[0].item<float>(), 3.0f);
  // Clipping scales by max_norm / (norm + 1e-6) (Megatron's guard), the
  // factor rounded to fp32 and each product once: gamma_2 of fp32; the norm
  // is summed in double.
  const double clipped = 5.0 / (5.0 + 1e-6);
  clip_grads_to_norm(params, 5.0, 1.0);
  EXPECT_NEAR(global_grad_norm(params), clipped, gamma(2, kFp32));
  clip_grads_to_norm(params, 1.0, 0.0);  // 0 disables clipping
  EXPECT_NEAR(global_grad_norm(params), clipped, gamma(2, kFp32));
  b.mutable_grad()[0][0] = NAN;
  EXPECT_FALSE(std::isfinite(global_grad_norm(params)));
}

}  // namespace
}  // namespace giant::optim
