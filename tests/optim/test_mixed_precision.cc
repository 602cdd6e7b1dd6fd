// fp32 master weights (updates below bf16's resolution still add up, as in
// fp32) and the dynamic loss scaler (halving with hysteresis, growth after
// the window, the floor).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "giant/optim/adamw.h"
#include "giant/optim/loss_scaler.h"
#include "giant/optim/master_weights.h"
#include "support/rounding.h"
#include "support/tensor_error.h"

namespace giant::optim {
namespace {

using giant::test::gamma;
using giant::test::relative_error;
constexpr double kFp32 = giant::test::unit_roundoff(Precision::fp32);

// 1000 AdamW steps of lr 1e-4 with a constant gradient: each moves the
// weight by about 1e-4, under half of bf16's spacing at 1 (2^-7 = 0.0078),
// so a bf16 weight updated in place never moves. The master moves exactly
// as a float32 weight does, and its rounded copy follows it.
TEST(MasterWeights, UpdatesBelowBf16ResolutionAddUpAsInFp32) {
  const AdamWOptions options{0.9, 0.95, 1e-8, 0.0};
  const torch::Tensor initial = torch::ones({64});
  torch::Tensor fp32 = initial.clone().set_requires_grad(true);
  torch::Tensor compute = initial.to(torch::kBFloat16).set_requires_grad(true);
  torch::Tensor naive = initial.to(torch::kBFloat16).set_requires_grad(true);
  const torch::Tensor gradient = torch::full({64}, 0.5);
  fp32.mutable_grad() = gradient.clone();
  naive.mutable_grad() = gradient.to(torch::kBFloat16);
  MasterWeights masters({compute}, {initial}, {gradient.clone()});
  ASSERT_EQ(masters.masters()[0].scalar_type(), torch::kFloat);
  AdamW reference({fp32}, options), mixed(masters.masters(), options), in_place({naive}, options);
  EXPECT_EQ(mixed.first_moment(0).scalar_type(), torch::kFloat);
  EXPECT_EQ(mixed.second_moment(0).scalar_type(), torch::kFloat);
  for (int step = 0; step < 1000; ++step) {
    reference.step(1e-4);
    mixed.step(1e-4);
    masters.copy_to_compute();
    in_place.step(1e-4);
  }
  // Each step moves it by lr m_hat / (sqrt(v_hat) + eps) = 1e-4 (1 - 2e-8)
  // for a constant gradient, rounded once to fp32 near 1 (and the update
  // itself through about ten roundings): gamma_1000 of fp32 on 1 in all.
  const double moved = 1.0 - fp32[0].item<float>();
  EXPECT_NEAR(moved, 0.1, gamma(1000, kFp32) + 0.1 * gamma(10, kFp32) + 0.1 * 2e-8);
  EXPECT_TRUE(torch::equal(masters.masters()[0], fp32.detach())) << "the master moves as fp32 does";
  EXPECT_TRUE(torch::equal(compute, fp32.detach().to(torch::kBFloat16))) << "the compute copy is it, rounded";
  EXPECT_EQ(naive[0].item<float>(), 1.0f) << "a bf16 weight updated in place never moves";
}

TEST(MasterWeights, StartFromTheExactInitialValues) {
  const torch::Tensor initial = torch::tensor({1.0f + 1e-3f, -3.14159f});
  torch::Tensor compute = initial.to(torch::kBFloat16);
  MasterWeights masters({compute}, {initial}, {torch::zeros({2})});
  EXPECT_TRUE(torch::equal(masters.masters()[0], initial));  // not the rounded compute copy
  EXPECT_FALSE(torch::equal(compute.to(torch::kFloat), initial));
  EXPECT_THROW(MasterWeights({compute}, {torch::zeros({3})}, {torch::zeros({2})}), std::exception);
}

// step(lr, grad_scale) is step(lr) on gradients multiplied by grad_scale,
// on the fused float32 path and on the tensor-op path (bf16 gradients).
TEST(AdamW, GradScaleIsAppliedInsideTheUpdate) {
  for (auto grad_dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::manual_seed(3);
    const torch::Tensor initial = torch::randn({5, 7}), grad = torch::randn({5, 7}).to(grad_dtype);
    torch::Tensor scaled = initial.clone().set_requires_grad(true), plain = initial.clone().set_requires_grad(true);
    scaled.mutable_grad() = grad.clone();
    plain.mutable_grad() = (grad.to(torch::kFloat) * 0.125).to(grad_dtype);
    AdamW a({scaled}, {}), b({plain}, {});
    for (int i = 0; i < 3; ++i) {
      a.step(1e-2, 0.125);
      b.step(1e-2);
    }
    // The scale is a power of two, exact in either place; what may differ is
    // the order of each step's ten or so fp32 roundings, over 3 steps.
    EXPECT_LE(relative_error(scaled, plain), 3 * gamma(10, kFp32)) << grad_dtype;
    EXPECT_TRUE(torch::equal(scaled.grad(), grad)) << "the gradient itself is left as it is";
  }
}

TEST(LossScaler, HalvesAfterHysteresisAndGrowsAfterTheWindow) {
  LossScaler scaler({65536, /*window=*/3, /*hysteresis=*/2, /*min_scale=*/1});
  EXPECT_EQ(scaler.scale(), 65536);
  scaler.update(true);  // the first overflow is tolerated
  EXPECT_EQ(scaler.scale(), 65536);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 32768);
  scaler.update(true);  // past the hysteresis every overflow halves
  EXPECT_EQ(scaler.scale(), 16384);
  scaler.update(false);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 16384);
  scaler.update(false);  // three good steps in a row
  EXPECT_EQ(scaler.scale(), 32768);
  scaler.update(true);  // growth restored the hysteresis
  EXPECT_EQ(scaler.scale(), 32768);
  scaler.update(false);
  scaler.update(false);
  scaler.update(true);  // an overflow restarts the window
  EXPECT_EQ(scaler.scale(), 16384);
  EXPECT_EQ(scaler.overflows(), 5);
}

TEST(LossScaler, NeverGoesBelowItsFloor) {
  LossScaler scaler({4, 1000, 1, 2});
  for (int i = 0; i < 5; ++i) scaler.update(true);
  EXPECT_EQ(scaler.scale(), 2);
  EXPECT_THROW(LossScaler({0.5, 1000, 1, 1}), std::exception);
  EXPECT_THROW(LossScaler({4, 0, 1, 1}), std::exception);
}

}  // namespace
}  // namespace giant::optim
