// Gradient norm and clipping by global norm.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace giant::ccl {
class Communicator;
}

namespace giant::optim {

// L2 norm over the gradients of all parameters (those without one skipped),
// accumulated in double. Not finite when any gradient is not.
double global_grad_norm(const std::vector<at::Tensor>& parameters);

// The same across a tensor-parallel group: parameters marked as shards are
// summed over `shard_group` (each shard counted once), the replicated ones
// counted once. Every rank of the group gets the same value. Data-parallel
// replicas need no reduction: their gradients are already averaged.
double global_grad_norm(const std::vector<at::Tensor>& parameters, const std::vector<bool>& is_shard,
                        ccl::Communicator* shard_group);
// The same when the parameters are split further across `partition_group`
// (a sharded optimizer's data-parallel ranks, each holding disjoint
// stretches): every part is summed over it first.
double global_grad_norm(const std::vector<at::Tensor>& parameters, const std::vector<bool>& is_shard,
                        ccl::Communicator* shard_group, ccl::Communicator* partition_group);

// The factor clipping multiplies the gradients by: max_norm / norm when
// norm > max_norm, else 1 (always 1 when max_norm <= 0).
double clip_coefficient(double norm, double max_norm);
// Multiplies every gradient by clip_coefficient (or AdamW::step takes it as
// its grad_scale). `norm` is global_grad_norm's result, so it can be
// combined across ranks before clipping.
void clip_grads_to_norm(const std::vector<at::Tensor>& parameters, double norm, double max_norm);

}  // namespace giant::optim
