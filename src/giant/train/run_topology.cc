#include "giant/train/run_topology.h"

#include <torch/torch.h>

#include "giant/parallel/tensor_collectives.h"

namespace giant::train {

double RunTopology::dp_mean(double value) const {
  if (!mesh || mesh->shape().dp == 1) return value;
  at::Tensor t = torch::full({1}, value, torch::kDouble);
  parallel::allreduce_(t, mesh->dp(), ccl::ReduceOp::avg);
  return t.item<double>();
}

double RunTopology::from_last_stage(double value, bool holds_loss) const {
  if (!pipelined) return value;
  at::Tensor t = torch::full({1}, holds_loss ? value : 0.0, torch::kDouble);
  parallel::allreduce_(t, mesh->pp());
  return t.item<double>();
}

int RunTopology::largest_on_any_rank(int value) const {
  if (!mesh) return value;
  at::Tensor t = torch::full({1}, value, torch::kInt);
  parallel::allreduce_(t, mesh->world(), ccl::ReduceOp::max);
  return t.item<int>();
}

bool RunTopology::on_every_rank(bool value) const {
  if (!mesh) return value;
  at::Tensor t = torch::full({1}, value ? 1 : 0, torch::kInt);
  parallel::allreduce_(t, mesh->world(), ccl::ReduceOp::min);
  return t.item<int>() == 1;
}

}  // namespace giant::train
