#include "giant/layout/run_precision.h"

namespace giant {

std::string RunPrecision::describe() const {
  if (compute == gradients) return precision_name(compute);
  return std::string(precision_name(compute)) + " (gradients " + precision_name(gradients) + ")";
}

}  // namespace giant
