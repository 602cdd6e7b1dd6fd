#include "giant/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace giant::optim {

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) {
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  const int64_t decay_steps = total_steps - warmup_steps;
  if (decay_steps <= 0 || step >= total_steps) {
    return decay_steps <= 0 ? lr : min_lr;
  }
  const double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps);
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * std::min(progress, 1.0)));
  return min_lr + (lr - min_lr) * cosine;
}

}  // namespace giant::optim
