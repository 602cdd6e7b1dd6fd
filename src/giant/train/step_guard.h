// Skips steps whose loss or gradient norm is not finite, and stops the run
// after several in a row (a diverged run, not a one-off overflow).
#pragma once

#include <cstdint>

namespace giant::train {

class StepGuard {
 public:
  explicit StepGuard(int64_t max_bad_in_a_row) : max_bad_in_a_row_(max_bad_in_a_row) {}

  // True when the step may be applied: `finite` says whether the loss and
  // every rank's gradients were finite (loss and grad_norm are for the
  // message). False when it must be skipped; throws giant::Error once
  // max_bad_in_a_row steps in a row were skipped.
  bool accept(int64_t step, bool finite, double loss, double grad_norm);

  int64_t skipped_total() const { return skipped_total_; }
  int64_t bad_in_a_row() const { return bad_in_a_row_; }
  // Resuming from a checkpoint: the counts it saved.
  void restore(int64_t bad_in_a_row, int64_t skipped_total) {
    bad_in_a_row_ = bad_in_a_row;
    skipped_total_ = skipped_total;
  }

 private:
  int64_t max_bad_in_a_row_;
  int64_t bad_in_a_row_ = 0;
  int64_t skipped_total_ = 0;
};

}  // namespace giant::train
