// Gradient norm and clipping by global norm.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace giant::ccl {
class Communicator;
}

namespace giant::optim {

// The groups a gradient norm is summed over; null (or size 1): none.
struct GradNormGroups {
  // Parameters marked as shards are summed over it (each shard counted
  // once), the replicated ones counted once.
  ccl::Communicator* tensor_parallel = nullptr;
  // The parameters are split further across it (a sharded optimizer's
  // data-parallel ranks, each holding disjoint stretches): every part is
  // summed over it first.
  ccl::Communicator* partition = nullptr;
  // Pipeline stages, each holding other layers: their totals are summed.
  ccl::Communicator* pipeline = nullptr;
};

// L2 norm over the gradients of all parameters (those without one skipped),
// accumulated in double; every rank of the groups gets the same value. Not
// finite when any gradient is not. Data-parallel replicas need no
// reduction: their gradients are already averaged. A weight held twice (a
// tied copy on another stage) is passed by one holder only.
double global_grad_norm(const std::vector<at::Tensor>& parameters, const std::vector<bool>& is_shard = {},
                        const GradNormGroups& groups = {});

// The factor clipping multiplies the gradients by: max_norm / norm when
// norm > max_norm, else 1 (always 1 when max_norm <= 0).
double clip_coefficient(double norm, double max_norm);
// Multiplies every gradient by clip_coefficient (or AdamW::step takes it as
// its grad_scale). `norm` is global_grad_norm's result, so it can be
// combined across ranks before clipping.
void clip_grads_to_norm(const std::vector<at::Tensor>& parameters, double norm, double max_norm);

}  // namespace giant::optim
