#include "giant/train/run_topology.h"

#include <torch/torch.h>

#include "giant/base/units.h"
#include "giant/parallel/agreement.h"
#include "giant/parallel/tensor_collectives.h"
#include "giant/planner/comm_model.h"

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
  return parallel::largest_on_any_rank(value, mesh ? &mesh->world() : nullptr);
}

bool RunTopology::on_every_rank(bool value) const {
  return parallel::on_every_rank(value, mesh ? &mesh->world() : nullptr);
}

std::unique_ptr<parallel::Mesh> make_mesh(std::shared_ptr<ccl::Communicator> world, parallel::MeshShape shape,
                                          const ParallelSettings& parallel, std::string& note) {
  ccl::CommConfig groups = world->config();
  if (parallel.known_cluster && !parallel.ccl_model_set) {
    groups = planner::with_cluster_links(groups, *parallel.known_cluster);
    note = "ccl chooses its algorithms on the cluster's links: TCP " + format_bit_rate(8e9 * groups.tcp_gbps) + ", " +
           format_seconds(groups.tcp_alpha_us * 1e-6) + " a message";
    if (world->shared_memory()) note += "; shared memory " + format_bytes(1e9 * groups.shm_gbps) + "/s";
  }
  return std::make_unique<parallel::Mesh>(std::move(world), shape, groups);
}

}  // namespace giant::train
