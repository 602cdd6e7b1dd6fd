// Comparing two checkpoints' states, for the tests of resumed runs.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>

#include <torch/torch.h>

#include "giant/checkpoint/loader.h"

namespace giant::train::test {

// Every tensor of two checkpoints (generator states too) is bitwise the
// same, and so are the optimizer steps, the loss scale and the samples consumed.
inline void expect_same_state(const std::filesystem::path& a, const std::filesystem::path& b) {
  const checkpoint::CheckpointLoader left(a), right(b);
  ASSERT_EQ(left.manifest().tensors.size(), right.manifest().tensors.size());
  for (const auto& tensor : left.manifest().tensors) {
    ASSERT_TRUE(right.has(tensor.name)) << tensor.name;
    EXPECT_TRUE(torch::equal(left.read(tensor.name), right.read(tensor.name))) << tensor.name;
  }
  EXPECT_EQ(left.manifest().train.optimizer_steps, right.manifest().train.optimizer_steps);
  EXPECT_EQ(left.manifest().train.loss_scale, right.manifest().train.loss_scale);
  EXPECT_EQ(left.manifest().consumed_samples, right.manifest().consumed_samples);
}

}  // namespace giant::train::test
