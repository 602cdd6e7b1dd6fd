// fp32 master weights of a model that computes in a lower precision
// (Micikevicius et al. 2018): the optimizer updates the float32 copies, and
// the model's tensors are refreshed from them after each step, rounded to
// nearest. Updates far below the low precision's resolution still add up in
// the masters.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace giant::optim {

class MasterWeights {
 public:
  // compute[i]: a tensor the model computes with (a parameter, or a sharded
  // optimizer's stretch of one), in its low precision. initial[i]: its
  // starting value in float32 (the exact fp32 initialisation, not the
  // rounded compute copy). gradient[i]: where its gradient lands (any
  // floating dtype; a persistent buffer, attached as the master's .grad()).
  MasterWeights(std::vector<at::Tensor> compute, const std::vector<at::Tensor>& initial,
                const std::vector<at::Tensor>& gradient);

  // The float32 masters, each with its gradient attached: what the
  // optimizer, the gradient norm and clipping see.
  const std::vector<at::Tensor>& masters() const { return masters_; }
  // Rounds every master into its compute tensor.
  void copy_to_compute();

 private:
  std::vector<at::Tensor> compute_;
  std::vector<at::Tensor> masters_;
};

}  // namespace giant::optim
