#include "giant/optim/clipping.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "giant/base/error.h"
#include "giant/ccl/communicator.h"
#include "giant/parallel/tensor_collectives.h"

namespace giant::optim {
namespace {


// The sum of squares accumulated in double (each square rounded in the
// gradient's own dtype, the same in any layout): a sharded optimizer's
// stretches then sum to the whole gradients' value within 1e-16, so the
// clipping scale rounds to the same float whatever the ZeRO stage.
double sum_of_squares(const at::Tensor& grad) {
  const at::Tensor flat = grad.reshape({-1});
  constexpr int64_t kChunk = int64_t{1} << 18;  // bounds the temporary squares
  double total = 0.0;
  for (int64_t begin = 0; begin < flat.numel(); begin += kChunk) {
    const at::Tensor part = flat.narrow(0, begin, std::min(kChunk, flat.numel() - begin));
    total += part.pow(2).sum(at::kDouble).item<double>();
  }
  return total;
}

}  // namespace

double global_grad_norm(const std::vector<at::Tensor>& parameters, const std::vector<bool>& is_shard,
                        const GradNormGroups& groups) {
  GIANT_CHECK(is_shard.empty() || is_shard.size() == parameters.size(), "is_shard has ", is_shard.size(),
              " entries for ", parameters.size(), " parameters");
  auto spans = [](const ccl::Communicator* group) { return group != nullptr && group->size() > 1; };
  double shards = 0.0, replicated = 0.0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const at::Tensor& grad = parameters[i].grad();
    if (grad.defined()) (!is_shard.empty() && is_shard[i] ? shards : replicated) += sum_of_squares(grad);
  }
  if (spans(groups.partition)) {
    at::Tensor parts = at::tensor({shards, replicated}, at::kDouble);
    parallel::allreduce_(parts, *groups.partition);
    shards = parts[0].item<double>();
    replicated = parts[1].item<double>();
  }
  if (spans(groups.tensor_parallel)) {
    at::Tensor total = at::full({1}, shards, at::kDouble);
    parallel::allreduce_(total, *groups.tensor_parallel);
    shards = total.item<double>();
  }
  double squares = shards + replicated;
  if (spans(groups.pipeline)) {
    at::Tensor total = at::full({1}, squares, at::kDouble);
    parallel::allreduce_(total, *groups.pipeline);
    squares = total.item<double>();
  }
  return std::sqrt(squares);
}

double clip_coefficient(double norm, double max_norm) {
  return max_norm > 0.0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
}

void clip_grads_to_norm(const std::vector<at::Tensor>& parameters, double norm, double max_norm) {
  const double factor = clip_coefficient(norm, max_norm);
  if (factor == 1.0) return;
  for (const auto& p : parameters) {
    at::Tensor grad = p.grad();
    if (grad.defined()) grad.mul_(factor);
  }
}

}  // namespace giant::optim
