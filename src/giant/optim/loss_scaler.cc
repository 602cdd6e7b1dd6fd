#include "giant/optim/loss_scaler.h"

#include <algorithm>

#include "giant/base/error.h"

namespace giant::optim {

LossScaler::LossScaler(LossScalerOptions options)
    : options_(options), scale_(options.initial_scale), hysteresis_left_(options.hysteresis) {
  GIANT_CHECK(options_.initial_scale >= options_.min_scale && options_.min_scale > 0 && options_.window >= 1 &&
                  options_.hysteresis >= 1,
              "loss scaler: initial scale ", options_.initial_scale, ", minimum ", options_.min_scale, ", window ",
              options_.window, ", hysteresis ", options_.hysteresis);
}

void LossScaler::update(bool overflowed) {
  if (overflowed) {
    ++overflows_;
    good_steps_ = 0;
    if (--hysteresis_left_ <= 0) scale_ = std::max(scale_ / 2, options_.min_scale);
    return;
  }
  if (++good_steps_ == options_.window) {
    good_steps_ = 0;
    hysteresis_left_ = options_.hysteresis;
    scale_ *= 2;
  }
}

void LossScaler::restore(const State& state) {
  scale_ = state.scale;
  good_steps_ = state.good_steps;
  hysteresis_left_ = state.hysteresis_left;
  overflows_ = state.overflows;
}

}  // namespace giant::optim
