// Megatron-LM's blending of several corpora by weight: the weights are
// normalized, and global sample i goes to the source with the largest
// deficit weight x (i + 1) - samples taken so far (ties to the first
// source). So at every prefix of the order each source's count is within one
// sample of its share, and the order depends only on the weights.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace giant::data {

class BlendOrder {
 public:
  // At least one weight, each finite and > 0 (GIANT_CHECK; config errors are
  // the caller's, in the user's terms).
  explicit BlendOrder(std::vector<double> weights);

  struct Pick {
    int source = 0;
    int64_t index = 0;  // the source's own sample counter: its index-th sample
  };
  // Amortized O(sources) for increasing indices; going back restarts from the
  // nearest saved position (every kSnapshotEvery samples). Thread-safe.
  Pick at(int64_t index) const;

  const std::vector<double>& weights() const { return weights_; }  // normalized

 private:
  static constexpr int64_t kSnapshotEvery = 4096;
  void advance_to(int64_t index) const;  // with mutex_ held

  std::vector<double> weights_;
  mutable std::mutex mutex_;
  mutable int64_t next_ = 0;             // the next sample to assign
  mutable std::vector<int64_t> taken_;   // per source, before sample next_
  mutable std::vector<std::vector<int64_t>> snapshots_;  // taken_ before sample k x kSnapshotEvery
};

}  // namespace giant::data
