// AdamW with decoupled weight decay (Loshchilov and Hutter 2019).
//
// Decay applies to matrices and embeddings only, never to norms and biases
// (the 1-D parameters). The update of a contiguous float32 CPU parameter runs
// as one fused pass over its data; other devices and dtypes go through
// tensor ops, so device code needs no change here.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace giant::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  AdamW(std::vector<at::Tensor> parameters, AdamWOptions options);
  // decay[i]: whether parameter i decays (e.g. stretches of a sharded
  // optimizer, which are flat, take their parameter's decays()).
  AdamW(std::vector<at::Tensor> parameters, std::vector<bool> decay, AdamWOptions options);

  // One update at learning rate `lr` of every parameter that has a gradient,
  // the gradients read multiplied by grad_scale (unscaling and clipping in
  // the same pass; the gradients themselves are left as they are).
  void step(double lr, double grad_scale = 1.0);
  // Drops every gradient (the next backward allocates fresh ones).
  void zero_grad();

  int64_t steps_taken() const { return step_; }
  // Resuming from a checkpoint: the step count (bias correction) it saved;
  // its moments are loaded into first_moment()/second_moment() in place.
  void restore_steps_taken(int64_t steps) { step_ = steps; }
  const std::vector<at::Tensor>& parameters() const { return parameters_; }
  // Parameter i's moments (the same shape, dtype and device as it).
  const at::Tensor& first_moment(size_t i) const { return moments_.at(i).first; }
  const at::Tensor& second_moment(size_t i) const { return moments_.at(i).second; }
  static bool decays(const at::Tensor& parameter) { return parameter.dim() >= 2; }

 private:
  struct Moments {
    at::Tensor first, second;
  };
  void update(at::Tensor& parameter, const at::Tensor& grad, Moments& moments, double lr, double decay,
              double grad_scale) const;

  std::vector<at::Tensor> parameters_;
  std::vector<bool> decay_;
  std::vector<Moments> moments_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace giant::optim
