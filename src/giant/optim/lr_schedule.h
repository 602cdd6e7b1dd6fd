// Learning rate: linear warmup from 0, then cosine decay to min_lr.
#pragma once

#include <cstdint>

namespace giant::optim {

struct LrSchedule {
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // LR of optimizer step `step` (0-based): step s < warmup_steps gets
  // lr * (s + 1) / warmup_steps (so the first step is never 0); then cosine
  // from lr down to min_lr at total_steps.
  double at(int64_t step) const;
};

}  // namespace giant::optim
