// Dynamic loss scaling for fp16 (Micikevicius et al. 2018, as Megatron-LM
// and torch.cuda.amp do it): the loss is multiplied by the scale before
// backward, so small gradients do not flush to zero, and the gradients are
// divided by it before the update. A step whose gradients overflowed is
// skipped; after `hysteresis` overflows (counted since the scale last grew)
// the scale halves, and after `window` steps in a row without one it doubles.
#pragma once

#include <cstdint>

namespace giant::optim {

struct LossScalerOptions {
  double initial_scale = 65536;  // 2^16
  int64_t window = 1000;
  int64_t hysteresis = 2;
  double min_scale = 1;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options);

  double scale() const { return scale_; }
  // Records one step's outcome (the same on every rank): overflowed means
  // some gradient somewhere was not finite, and the step must be skipped.
  void update(bool overflowed);

  int64_t overflows() const { return overflows_; }

  // Everything update() depends on, for checkpoints.
  struct State {
    double scale = 0;
    int64_t good_steps = 0, hysteresis_left = 0, overflows = 0;
  };
  State state() const { return {scale_, good_steps_, hysteresis_left_, overflows_}; }
  void restore(const State& state);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;      // since the last overflow or growth
  int64_t hysteresis_left_;     // overflows still tolerated before halving
  int64_t overflows_ = 0;
};

}  // namespace giant::optim
