#include "giant/train/step_guard.h"

#include <string>

#include "giant/base/error.h"

namespace giant::train {

bool StepGuard::accept(int64_t step, bool finite, double loss, double grad_norm) {
  if (finite) {
    bad_in_a_row_ = 0;
    return true;
  }
  ++bad_in_a_row_;
  ++skipped_total_;
  if (bad_in_a_row_ >= max_bad_in_a_row_) {
    throw Error("training stopped at step " + std::to_string(step) + ": " +
                std::to_string(bad_in_a_row_) +
                " steps in a row had a non-finite loss or gradient norm (last: loss " +
                std::to_string(loss) + ", gradient norm " + std::to_string(grad_norm) +
                "); lower train.lr or raise train.max_bad_steps");
  }
  return false;
}

}  // namespace giant::train
