#include "giant/data/blend.h"

#include <cmath>

#include "giant/base/error.h"

namespace giant::data {

BlendOrder::BlendOrder(std::vector<double> weights) : weights_(std::move(weights)) {
  GIANT_CHECK(!weights_.empty(), "a blend needs at least one source");
  double total = 0;
  for (double w : weights_) {
    GIANT_CHECK(std::isfinite(w) && w > 0, "blend weights must be finite and positive, got ", w);
    total += w;
  }
  for (double& w : weights_) w /= total;
  taken_.assign(weights_.size(), 0);
  snapshots_.push_back(taken_);
}

void BlendOrder::advance_to(int64_t index) const {
  if (index < next_) {
    const auto block = static_cast<size_t>(index / kSnapshotEvery);
    taken_ = snapshots_[block];
    next_ = static_cast<int64_t>(block) * kSnapshotEvery;
  }
  while (next_ < index) {
    const double target = static_cast<double>(next_ + 1);
    size_t best = 0;
    double best_deficit = weights_[0] * target - static_cast<double>(taken_[0]);
    for (size_t s = 1; s < weights_.size(); ++s) {
      const double deficit = weights_[s] * target - static_cast<double>(taken_[s]);
      if (deficit > best_deficit) best = s, best_deficit = deficit;
    }
    ++taken_[best];
    ++next_;
    if (next_ % kSnapshotEvery == 0 && static_cast<size_t>(next_ / kSnapshotEvery) == snapshots_.size()) {
      snapshots_.push_back(taken_);
    }
  }
}

BlendOrder::Pick BlendOrder::at(int64_t index) const {
  GIANT_CHECK(index >= 0, "sample index must be >= 0, got ", index);
  std::lock_guard<std::mutex> lock(mutex_);
  advance_to(index);
  // The pick for sample `index` is the argmax at index + 1; advancing one more
  // step tells which source's count grew.
  const std::vector<int64_t> before = taken_;
  advance_to(index + 1);
  for (size_t s = 0; s < taken_.size(); ++s) {
    if (taken_[s] != before[s]) return Pick{static_cast<int>(s), before[s]};
  }
  GIANT_CHECK(false, "blend order did not advance at sample ", index);
  return {};
}

}  // namespace giant::data
